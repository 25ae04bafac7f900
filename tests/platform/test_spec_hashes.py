"""Every shipped spec's hash, as it was before the platform was restructured: a refactoring must
not change a run's identity (MLflow tags, run directories, caches all key on it)."""
import pytest

from multigrain.platform.specs import load_spec, spec_hash
from tests.conftest import ROOT

#: spec (under jsonnet_configs/) -> (sha256 of its canonical JSON, the --ext-vars it needs)
SHIPPED = {
    "cls/chnsenticorp_backbone.jsonnet": ("9ac66e2db62840ec78bdbb30e66e88b03f07ee07a7aebb2986a4db7fd9d6a2de", {}),
    "cls/chnsenticorp_big.jsonnet": ("e5c535abe030480c011a6a91730267e2c3b74ce9ed05ca44992262dd9b323759", {}),
    "cls/chnsenticorp_big_m3e_vec.jsonnet": ("2e7c24fc6b41ca90c6810d505e478562d7d6e38c8b313c4b2d7020f7cad25d12", {"vectors": "runs/vectors"}),
    "cls/chnsenticorp_big_vec.jsonnet": ("c8e4571b693f64c8ccc00cdadd501ff4d714060a187b460e0a398befea9b0488", {"vectors": "runs/vectors"}),
    "cls/chnsenticorp_hrmf.jsonnet": ("244395bea1d31984c1aad9786d9973b30b877d82a76c1d7dfb4cd81ad98ffcf3", {}),
    "cls/chnsenticorp_m3e_backbone.jsonnet": ("9652f3005597a74a007a57944f28083b7499537055c6d8ae01da5f17b77813e3", {}),
    "cls/chnsenticorp_m3e_big.jsonnet": ("6572004c645577623b50d3dd03e091b3bc1413de65ae3586cd2930952fb3568a", {}),
    "cls/chnsenticorp_m3e_hrmf.jsonnet": ("958a3e11e7142f258567fcff6e1a76f05f89b8ba5e8128b18bd0113b9f1cff84", {}),
    "cls/chnsenticorp_m3e_mwa.jsonnet": ("0bc5770679c77232032a463c9795d8975f4f28cd2e966e34fe95b600ce0aece5", {}),
    "cls/chnsenticorp_mwa.jsonnet": ("4f781f0f03866e773d3dc37f31d77dd49584ed8a33df0ddd516bc142bd9e5ee6", {}),
    # thucnews: test_dataset_reader given since 2026-11-26 (the test file had been scored on the dev bucket)
    "cls/thucnews_backbone.jsonnet": ("427297905602c3672646ef89ca7d7137ebb05d923718d22d7691182f24fcb092", {}),
    "cls/thucnews_big.jsonnet": ("4e4308a2730e4aba2306db9d1106b6fe598a7ca8fb2830d163e657085a8bf0de", {}),
    "cls/thucnews_big_vec.jsonnet": ("37085c0600fafa40f2d9064cd46b9e89efbec3c4bb83b54871d2295850e1eed1", {"vectors": "runs/vectors"}),
    "cls/thucnews_hrmf.jsonnet": ("a45ffee0f93affd8620d39e4675b16069d426ab71010e37b2184816a2ecfa323", {}),
    "cls/thucnews_mwa.jsonnet": ("2335b7783943bef862cd26fd4545ef7e98e84f0285ad2c8701f3829c5a964241", {}),
    "mrc/cmrc2018_backbone.jsonnet": ("b08e0929cbb2289266bc1e5725b720c8b79fdfa67d204d5050bd2d67e2612db8", {}),
    "mrc/cmrc2018_big.jsonnet": ("9ae7e705a1b9712914048eae449d52b00a9d33c7fce3f4bf2d9d4e735262834d", {}),
    "mrc/cmrc2018_big_vec.jsonnet": ("665871d3f99326637345a609f62784c2a7d39e17c6882d09a436cf39d9fb8efb", {"vectors": "runs/vectors"}),
    "mrc/cmrc2018_hrmf.jsonnet": ("b57b1ed97e70cc9584551743d0d47bd594abb1057a965009cd12c6a029db8918", {}),
    "mrc/cmrc2018_mwa.jsonnet": ("e3ec201dd47a40b3848e93e0089c126d0ba76b2f1d1f698c3deeef71ac7654e1", {}),
    # mt: warm-up a fraction of the run since 2026-11-26 (a fixed 1,000 steps filled most of a cut CPU run)
    "mt/tatoeba_tiny.jsonnet": ("098b6f9fa2c499e685e40d39df9a8b428c4fc61f14a323ff9fc4ad5288c43cf1", {}),
    "mt/tvsub_big.jsonnet": ("b690093bc71f8a72691c77f8008cef3aaafcc5bb1a408be08f5c021866b4bbcb", {}),
    "mt/tvsub_big_small.jsonnet": ("011e828deced73d57d3fd220878683da1b2bc67e964c71ab62bdb60d298dd90e", {}),
    "mt/tvsub_transformer.jsonnet": ("70982a8b6a1a7f6b2234ae0a09af799e1e2744a2fe52972876657e3da90177e7", {}),
    "mt/tvsub_transformer_small.jsonnet": ("06654af77d958cdbaee8d8e439d5a0f3e2ab03fcbf6fb069ee106f5e16e085ad", {}),
    # issue 40's recipes (pre-norm, inverse_sqrt, steps of warm-up): the 40-minute CPU run and the device call
    # *_small_cpu: issue 40's second 40-minute recipe (token batches, 180,000 pairs) since 2026-11-27
    "mt/tvsub_big_small_cpu.jsonnet": ("b2836d16c633bf8617310cd3f8f46c43b07e33e2cb963173daf59f7f2f6966c0", {}),
    # mt/*_small_gpu: the device call's recipe (never run) scales the encoder's input since 2026-11-27
    # and packs the decoder's target rows (pack_targets) since 2026-11-28
    "mt/tvsub_big_small_gpu.jsonnet": ("1003e30c3553fcbae620255400c04031c6537146c5c22aa17dc74ad30eb0cc04", {}),
    "mt/tvsub_transformer_small_cpu.jsonnet": ("0b92cf3f29a4e05f8bcae88e76516adf811ccadaf127e6aea0dab3f066daaf49", {}),
    "mt/tvsub_transformer_small_gpu.jsonnet": ("633e0df6adca437e9566d3555082b603891acea3c66d7d9ba34ab0c1eaac3f9d", {}),
    "ner/msra_big.jsonnet": ("4d38192dc48be2752a923702b9ce8d5bed63303ef69a44a5580942ee5a3c2f1f", {}),
    "ner/msra_big_vec.jsonnet": ("dd82aaa29919d443b311471c4376d2083c6265c802e5f435b76d74a9cc0be435", {"vectors": "runs/vectors"}),
    "ner/msra_bilstm_big.jsonnet": ("4bb1777ec557f03ff1bba9592a991059f6da8753107e38a2d117e9f484cfd473", {}),
    "ner/msra_bilstm_big_vec.jsonnet": ("a90a226b2f4d84b4d83fc9cc896f261bc21c0ea1ae6b33fa976fce090a52b290", {"vectors": "runs/vectors"}),
    "ner/msra_bilstm_crf.jsonnet": ("f92658347f5a98422ff13008e2eb8812d47870cb4cb33d0c0c5c31af2016fa64", {}),
    "ner/msra_bilstm_crf_vec.jsonnet": ("517922a819ef9ba6a2cfc5000afcfb44b808c1e58dd5a5f5489a5cec239883a9", {"vectors": "runs/vectors"}),
    "ner/msra_lattice_lstm.jsonnet": ("4bdeb3766c910258607eafaabd82ef40f2f518ef816397cb3f9326bfe977181c", {}),
    "ner/msra_lattice_lstm_vec.jsonnet": ("6cc72d6f7e10bc2d95116637e1e211df6cd1074dee619a6d6fd53bd020bc4b7a", {"vectors": "runs/vectors"}),
    "ner/msra_plte.jsonnet": ("ef77338a6f08cdb0cc8ade371ef834a981d41bec6f0b3c5ce4c72c08cad264aa", {}),
    "ner/msra_plte_sgd.jsonnet": ("ab284b84b259f48af8d6bf9f1e1fc4a5f142fc0274782704869ce12d86570fc2", {}),
    "ner/msra_plte_sgd_vec.jsonnet": ("4d834696a50eb2bb6216c42b319c4a6a74aae83d56a78eb4f38aac5aa2d5c158", {"vectors": "runs/vectors"}),
    "ner/msra_plte_vec.jsonnet": ("6c54fcdf99adbb4fa24879bc807a6b07aefb5cbd77a4ed45da0cc6f0da613ac2", {"vectors": "runs/vectors"}),
    "ner/msra_star.jsonnet": ("1f9b83c9c4689f819cad160a226d58c292d292bcc4c2028525d334925367c354", {}),
    "ner/msra_transformer.jsonnet": ("6e4a7a5df846dc4ee157e67759fc51d54d4c9f21792130c21e46b132bffca33b", {}),
    "ner/resume_big.jsonnet": ("fc1aa278d98fea01e7ce47ca7fbb0ffdc208ada75dbff4d36f1b2dbe25f47d7a", {}),
    "ner/resume_big_vec.jsonnet": ("2660b4e04cac032b181fbe8bb284fa12cdfc1f1c69da81fbc0e2837c701b6b43", {"vectors": "runs/vectors"}),
    "ner/resume_bilstm_big.jsonnet": ("c88645688df55945aacc6e3806985876ed3494abbfac4b1c7de4c76b593afa18", {}),
    "ner/resume_bilstm_big_vec.jsonnet": ("f89115e684cfa1e7a882d845b2e40e32f094d55ad3ae718aaea6751a0482b47a", {"vectors": "runs/vectors"}),
    "ner/resume_bilstm_crf.jsonnet": ("d6195f9afc21b05d7c7202211687d6902fb57229f4a8edf7755a95027823d982", {}),
    "ner/resume_bilstm_crf_vec.jsonnet": ("f21064daf702a4ade6de2b56d4fa787d1e91e0bf3e670550746c989ae90e9426", {"vectors": "runs/vectors"}),
    "ner/resume_lattice_lstm.jsonnet": ("7625018b4d12b6b4edcf5129e0f2960e0c415a29dcde25c88beb2c71c1d3c360", {}),
    "ner/resume_lattice_lstm_vec.jsonnet": ("163b9ae0997f4338203dbc5006146bba5c0f82aea6e227d148979a2c7aa427c2", {"vectors": "runs/vectors"}),
    "ner/resume_plte.jsonnet": ("df96c09f9afe24b1a3fa46af61142ba6374dbef6ca88f32124b9f2ef56cb4d3a", {}),
    "ner/resume_plte_sgd.jsonnet": ("43d74468aabf749c3c7022a535cddd663e90a6fb3528eb1bbdeae82fd98c441b", {}),
    "ner/resume_plte_sgd_vec.jsonnet": ("897a405c57a38f91f070ee2aceac68c5c93978e79bfae0d04ad66b932dab6805", {"vectors": "runs/vectors"}),
    "ner/resume_plte_vec.jsonnet": ("619597471eb1f3c754c3bc6d4165c9763ad8c2408b9de70cd55b7b5cc1abd133", {"vectors": "runs/vectors"}),
    "ner/resume_quickstart.jsonnet": ("69162857fbaf09ea68f390ec5e0651a9440c7609552d3d9d670b4f6acf4b1273", {}),
    "ner/resume_star.jsonnet": ("5bbfd98a0c81610e95b7eef065c7ee9958ba625766420b9790974566206d4009", {}),
    "ner/resume_transformer.jsonnet": ("349a20ea1b3e0d083fd819de2586b688431f55f3f7981731681815a709e5db7a", {}),
    "ner/weibo_big.jsonnet": ("702298d4d0e2e58bca8d3a1f619760356b76836600034fa4d348faeeb914ce41", {}),
    "ner/weibo_big_vec.jsonnet": ("b0280cb91c51499c102dc3c01783d40b314fedd179c1be055a0ebcc4f0fe7ca3", {"vectors": "runs/vectors"}),
    "ner/weibo_bilstm_big.jsonnet": ("4aedf8cf74737c28c64835e214866e66e6125b868e6d33b7e31fda87ef9dd551", {}),
    "ner/weibo_bilstm_big_vec.jsonnet": ("7a60d5a683b15522a06575c9071261918e607631b15e622a1843aec18eee6b8e", {"vectors": "runs/vectors"}),
    "ner/weibo_bilstm_crf.jsonnet": ("ece204e7e1afd123a564cb84d8fcfe28570c52daeea26b5d8e22c09b5910da6d", {}),
    "ner/weibo_bilstm_crf_vec.jsonnet": ("2c71fc79c60de030a1eae7292ed0f939f3d22449edaf1398b8834bc1b12522f6", {"vectors": "runs/vectors"}),
    "ner/weibo_lattice_lstm.jsonnet": ("d2d890407f78eab3e9270e76f804d055c43e3d6ecf20c5690d197afe5e1978bb", {}),
    "ner/weibo_lattice_lstm_vec.jsonnet": ("2f8f73433c35b32b3613cc3428b4369c397d96f4914ed4ee40934f8448de3a23", {"vectors": "runs/vectors"}),
    "ner/weibo_plte.jsonnet": ("c2ea27b1b1dd396da5803d2ad58ccc44bf9661ca1be7416191a5cd5d7313bbe4", {}),
    "ner/weibo_plte_sgd.jsonnet": ("3b7ef7cc62046e74d43e72bf00048cd99f090b612d86f662e3d10df569e9b60e", {}),
    "ner/weibo_plte_sgd_vec.jsonnet": ("0892f775e4e665145c64b5f8c98a6335ebdb25300b603f75c2179f2772bc27bc", {"vectors": "runs/vectors"}),
    "ner/weibo_plte_vec.jsonnet": ("6b41169c5074e718a6e66601512151239eac9a4b7c00f83a8a14cc661c58b387", {"vectors": "runs/vectors"}),
    "ner/weibo_star.jsonnet": ("2a18dbad05b018b826303cd4e2a825e3e818bfcc42d3631c24b2072795b95d8a", {}),
    "ner/weibo_transformer.jsonnet": ("9465cd76cc57fe4fda41fc979fe339214596664c54b6445e4228ce181f40e9cd", {}),
    "pair/bq_backbone.jsonnet": ("a8a9a684a2f3e1005ceb753c40a85f527c72942555aea8639f3a0303796c34da", {}),
    "pair/bq_big.jsonnet": ("b87a4f3b22e2fe240e1d2450bcbeb710ffaa163e371bec64bd6e01c448dbfd21", {}),
    "pair/bq_big_vec.jsonnet": ("b924c9eece3ef20bf3b0ad40a4e4d3dc5b4e7e4e85e2f4d9bba2ef1ff7f9eb22", {"vectors": "runs/vectors"}),
    "pair/bq_hrmf.jsonnet": ("6345dde238f55d803f91cbe96e84ae9cc3b8e5863d9b3415722bc4ed1aaf3434", {}),
    "pair/bq_mwa.jsonnet": ("34398407a90e934ca0aedc336beb7027212777cf7c430d9a36cb5961c4c75a84", {}),
    "finetune/bq.jsonnet": ("65e96041b79ad287d789defe9f0e3a18170eaf289453bd59fc7df8e9b5a06cf5", {"pretrained": "runs/lattice_bert_tiny", "encoder": "lattice_bert"}),
    "finetune/chnsenticorp.jsonnet": ("3b74d915c4b983f656e9c64f777622ca16042c2b07f1ded13f0bf5b17da8781f", {"pretrained": "runs/lattice_bert_tiny", "encoder": "lattice_bert"}),
    "finetune/cmrc2018.jsonnet": ("10c316c546b6647a9bdb862b1f1572b0631bf98808044a20ca5dd03ec8c72562", {"pretrained": "runs/lattice_bert_tiny", "encoder": "lattice_bert"}),
    "finetune/msra_ner.jsonnet": ("df62a25d61a1fa04cb4a5276d2227399c8dc5d53971642c0c2e6ea644b954d7e", {"pretrained": "runs/lattice_bert_tiny", "encoder": "lattice_bert"}),
    "finetune/resume_ner.jsonnet": ("ef1424e2a587c6f11808735025757b10cd4747379e0efafefbc7e2a0ca022e8a", {"pretrained": "runs/lattice_bert_tiny", "encoder": "lattice_bert"}),
    "finetune/thucnews.jsonnet": ("b4a4e22503287ba0914fecb3c4954f3829b14d73ad35258e88bd401f3e74a348", {"pretrained": "runs/lattice_bert_tiny", "encoder": "lattice_bert"}),
    # pretrain: new identities with the SOP fix (pairs within one text; the TV subtitles a `document` source),
    # so no run pre-trained on pairs of unrelated texts is reused
    "pretrain/char_bert_tiny.jsonnet": ("c72c95241831d7c5564a4cd0446176f389ad4aafc3ad5402924e7be9919ac7bc", {}),
    "pretrain/lattice_bert_base.jsonnet": ("19b17dc0e68b0b1383734dd37973d91b54b541763e3065e59134597961915751", {}),
    "ner/resume_tagger_m3e.jsonnet": ("a9c98dc1075570018278103b93b9db3c8c3c06a52e74464397d2ecd8dfef4385", {}),
    "ner/resume_softmax_m3e.jsonnet": ("6cea7c4ab1b05df29a78ca41ea161873c1f87f126051bed154e320303e6b8800", {}),
    "ner/resume_lattice_lstm_m3e.jsonnet": ("83bc79ebf66a4baa9892d0d35bd27384361cc9bdf67baa8e729ce478b0f5a104", {}),
    "ner/resume_plte_m3e.jsonnet": ("a0c6563d5012d3e47286468ad6eaac49c49223c94caeedae1c809869b3744593", {}),
    "ner/resume_plte_m3e_wide.jsonnet": ("f49646fc343acbcf593d2df8e27e9c1a40af9bea1299e781e4d1c4654c5c225b", {}),
    "ner/resume_plte_m3e_msra.jsonnet": ("cce5634463175e77c8b7547ae85659c51dcea83b4553fbac9065940f8ddcc46b", {"msra_run": "runs/msra_tagger_m3e-cpu-e1-7b20d959"}),
    "ner/resume_tagger_m3e_msra.jsonnet": ("0a65937732376b1be5a8d7f9cfafacef1d86b65514ecc6237a6b1d2932dfddcf", {"msra_run": "runs/msra_tagger_m3e-cpu-e1-7b20d959"}),
    "ner/resume_plte_m3e_msra2.jsonnet": ("9ac596ec84f5eadad2178fec702c0e5908d90e07e606e2c097be366b7987c6d9", {"msra_run": "runs/msra_tagger_m3e_again-cpu-e1-d2b68728"}),
    "ner/resume_tagger_m3e_msra2.jsonnet": ("f0d69b0f61065ee126a73cc905808cfeb8367664b84a4fb412e8429ba1d59fda", {"msra_run": "runs/msra_tagger_m3e_again-cpu-e1-d2b68728"}),
    "ner/resume_big_m3e_msra2.jsonnet": ("71fa3b5d64135697d3ba4ff9d34c658754d0211b10c2ff7f8766392f5a10076c", {"msra_run": "runs/msra_tagger_m3e_again-cpu-e1-d2b68728"}),
    "ner/resume_lattice_lstm_m3e_msra2.jsonnet": ("73b3f44938aee30a65fba748d8d96966492c9ee64e7282b28f400ee03ff4a4b5", {"msra_run": "runs/msra_tagger_m3e_again-cpu-e1-d2b68728"}),
    "ner/weibo_tagger_m3e_msra2.jsonnet": ("d9bcc6490de1c28828d9d91d2f72097ae626b98cb84d92311f4ff13aad49ef6f", {"msra_run": "runs/msra_tagger_m3e_again-cpu-e1-d2b68728"}),
    "ner/weibo_plte_m3e_msra2.jsonnet": ("6eccf383c4fcd4cb9bf67262d533dd3da973f24c72427937bda8c285edc9783f", {"msra_run": "runs/msra_tagger_m3e_again-cpu-e1-d2b68728"}),
    "ner/weibo_big_m3e_msra2.jsonnet": ("d9013e2c284eeb5d0431e4c9413e6456b04289b913c51217140715a1fd255221", {"msra_run": "runs/msra_tagger_m3e_again-cpu-e1-d2b68728"}),
    "ner/msra_tagger_m3e_again.jsonnet": ("c70be5747629e70fc7deb0ae8807cbd3061c99d8031c3ba918048873a81cc436", {"msra_run": "runs/msra_tagger_m3e-cpu-e1-7b20d959"}),
    "ner/resume_big_m3e.jsonnet": ("848e83a5f8fce28632582b615f67e3d1ad65413cd6f678bd9f8eda4855252ff1", {}),
    "ner/weibo_tagger_m3e.jsonnet": ("0001c9c747e0fbfd0a39d730ddcdb4bbe947877c26c49717d56ca1c25e2f84e0", {}),
    "ner/weibo_softmax_m3e.jsonnet": ("41fafd4987022bcf261b1fd1768616e50284e69699b720e1e4d64ba244facaad", {}),
    "ner/weibo_lattice_lstm_m3e.jsonnet": ("589934039812e35ce75932c5915942d315ab1ffe937eec448e057c823c096e98", {}),
    "ner/weibo_plte_m3e.jsonnet": ("34730c53d3c232ae92cf574050d3a16875864a73c4a1d9f2b10ddce220d87f37", {}),
    "ner/weibo_plte_m3e_wide.jsonnet": ("12c807ebd07862174767b4a110d4994bfb16803ddf2ae3bac02805787ac638aa", {}),
    "ner/weibo_big_m3e.jsonnet": ("b9bdd3056871bb84df74e778c0c08cb6bbaffc1d165d7a372532d6953e39d390", {}),
    "ner/msra_tagger_m3e.jsonnet": ("681389f8765cdd15ef7c727114f5e2f0a02c8028e3950f8bcb220153966a2137", {}),
    "ner/msra_softmax_m3e.jsonnet": ("a11c78506e1835ac1b624a892ba5e7ec13d823fa2c00a0916aff10ade5f189bb", {}),
    "ner/msra_plte_m3e.jsonnet": ("764e7aee29b8fc01751047c0664bcbfc96f2fa514b438ea3124ec29a32c0c41f", {}),
    "ner/msra_big_m3e.jsonnet": ("05246c6da49c5c412da165564ac6ccb0f83f94eb9455c79057cf21fc16307332", {}),
    "pair/bq_m3e_backbone.jsonnet": ("4e5d473fe179aeff7936242c1f8fe92ba22a417d6d3eab3b550a5a9a9d9db9e3", {}),
    "pair/bq_m3e_mwa.jsonnet": ("b00edd8287b503c6013673eb01649214b40d4a1d595761ea1c13d75284f6b6de", {}),
    "pair/bq_m3e_hrmf.jsonnet": ("096177494f862cfdc29c453f1dd9b9cb222a7572c4a23b5c0b0becd64b9f1ddb", {}),
    "pretrain/lattice_bert_lite.jsonnet": ("a250b0e9cd081f8b43550bae8ded89bea1543ba6fa7753645b355e395380d2c0", {}),
    "pretrain/lattice_bert_tiny.jsonnet": ("d390a7d7138f0ca234d16ecb1b428d12e2433433a8fabc98213e9f9aa9fd3aa6", {}),
    "pretrain/lattice_bert_tiny_mlm.jsonnet": ("c9ab89648d485c899d97ab58ee9982fddd8ce2e5e32c7b9ab52e9fcddb82c963", {}),
}


def test_every_shipped_spec_is_listed():
    found = {str(p.relative_to(ROOT / "jsonnet_configs")) for p in (ROOT / "jsonnet_configs").glob("*/*.jsonnet")
             if p.parent.name != "suites"}  # a suite lists specs; it is not one
    assert found == set(SHIPPED)


def test_quickstart_hash():
    assert SHIPPED["ner/resume_quickstart.jsonnet"][0].startswith("69162857fbaf")


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_spec_hash_unchanged(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    digest, ext_vars = SHIPPED[name]
    assert spec_hash(load_spec(f"jsonnet_configs/{name}", [], ext_vars)) == digest
