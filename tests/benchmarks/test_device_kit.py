"""benchmarks/device_kit.py without the network: the data archive holds exactly the folders of the
parts asked for; a missing data folder is refused in one line before any archive is written; a kit
over the travel limit is refused in one line (its archive stays, to be repacked with fewer parts)."""
import io
import sys
import tarfile
import zipfile

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import device_kit  # noqa: E402
from multigrain.components.readers.tvsub import TvsubReader  # noqa: E402


@pytest.fixture
def kit(tmp_path, monkeypatch):
    data = tmp_path / "data"
    for folder in ("tvsub_zh_en", "wmt22_generaltest_zh_en", "wmt_newstest_zh_en", "tatoeba_cmn_eng"):
        (data / folder).mkdir(parents=True)
        (data / folder / "part.txt").write_text(f"{folder}\n", encoding="utf-8")

    def fetch_wheels(target, python_version):
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(target / f"jieba-0.42.1-py3-none-any-{python_version}.whl", "w") as wheel:
            wheel.writestr("jieba/__init__.py", "import nothing_here\n")
            wheel.writestr("jieba/dict.txt", "中国 10 ns\n北京 5 ns\n")
            wheel.writestr("jieba/finalseg/__init__.py", "")

    monkeypatch.setattr(device_kit, "DATA", data)
    monkeypatch.setattr(device_kit, "KIT", tmp_path / ".device")
    monkeypatch.setattr(device_kit, "fetch_wheels", fetch_wheels)
    monkeypatch.setattr(device_kit, "installed_backbone", lambda: tiny_backbone(tmp_path / "m3e-small"))
    return tmp_path


def tiny_backbone(folder):
    """A BERT of the backbone's kind, saved as m3e-small is: config.json and a pytorch_model.bin."""
    import torch
    from transformers import BertConfig, BertModel

    folder.mkdir(exist_ok=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    config.to_json_file(str(folder / "config.json"))
    torch.save(BertModel(config).state_dict(), folder / "pytorch_model.bin")
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    return folder


def test_archive_holds_the_parts_folders_and_the_calls_are_printed(kit, capsys):
    assert device_kit.main(["--parts", "speed", "mt"]) == 0
    with tarfile.open(kit / ".device" / "data.tar.gz") as tar:
        names = sorted(tar.getnames())
    mt_folders = ("tatoeba_cmn_eng", "tvsub_zh_en", "wmt22_generaltest_zh_en", "wmt_newstest_zh_en")
    assert [n for n in names if n.endswith("part.txt")] == [f"data/{f}/part.txt" for f in mt_folders]
    out = capsys.readouterr().out
    assert ('command "SESSION_S=570 MT_SEEDS=3 bash benchmarks/device_session.sh speed mt", '
            'carry [".device"], timeout_s 590') in out  # issue 40's recipe on every TVsub pair
    assert "LB_CHARS" not in out

def test_with_the_checks_in_the_call_the_pairs_are_sized_there(kit, capsys, monkeypatch):
    monkeypatch.setitem(device_kit.FOLDERS, "checks", ())  # the fixture's data holds the mt folders alone
    assert device_kit.main(["--parts", "checks", "mt"]) == 0
    out = capsys.readouterr().out
    assert "MT_PAIRS=auto MT_BATCH_PAIRS=350 MT_SEEDS=3 bash benchmarks/device_session.sh checks mt" in out


def test_missing_data_folder_is_refused_and_nothing_is_written(kit):
    with pytest.raises(SystemExit, match=r"data: missing bq_corpus, .*thucnews_titles") as refused:
        device_kit.main(["--parts", "lb"])
    assert "resume_ner" in str(refused.value)  # every missing folder named at once
    assert not (kit / ".device" / "data.tar.gz").exists()
    assert not list((kit / ".device").glob("*.tmp"))


def test_kit_over_the_travel_limit_is_refused(kit, monkeypatch, capsys):
    monkeypatch.setattr(device_kit, "LIMIT", 1024)
    assert device_kit.main(["--parts", "mt"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == "too large to travel: fewer --parts"
    assert "device run" not in captured.out


def test_lbert_and_ner_parts_pack_their_data(kit, capsys, monkeypatch):
    monkeypatch.setitem(device_kit.FOLDERS, "lbert", ("tvsub_zh_en",))  # the fixture's folders
    monkeypatch.setitem(device_kit.FOLDERS, "ner", ("tatoeba_cmn_eng",))
    assert device_kit.main(["--parts", "lbert", "ner"]) == 0
    with tarfile.open(kit / ".device" / "data.tar.gz") as tar:
        assert sorted(n for n in tar.getnames() if n.endswith("part.txt")) == \
            ["data/tatoeba_cmn_eng/part.txt", "data/tvsub_zh_en/part.txt"]
    out = capsys.readouterr().out  # 540 s each: one call could not hold both
    assert 'device run 1 of 2: command "LB_CHARS=N LB_S=S bash benchmarks/device_session.sh lbert", ' \
           'carry [".device"], timeout_s 580' in out
    assert 'device run 2 of 2: command "bash benchmarks/device_session.sh ner", carry [".device"], timeout_s 580' in out
    assert "2 calls on one kit (540 s + 540 s is over one call's 570 s)" in out
    assert device_kit.FOLDERS["lb"] == tuple(device_kit.CORPUS) + ("thucnews_titles",)


def test_the_ner_kit_carries_the_backbone_in_float16_and_jiebas_dictionary_not_its_wheel(kit, capsys, tmp_path,
                                                                                          monkeypatch):
    """site.tar.gz: embedding/m3e-small with float16 weights that transformers loads into a float32 model
    equal to the float32 weights rounded to float16, an empty embedding/__init__.py (found before an
    installed package), jieba's __init__.py and dict.txt as the wheel has them; the wheel itself stays."""
    import torch
    from transformers import AutoModel

    monkeypatch.setitem(device_kit.FOLDERS, "ner", ("tatoeba_cmn_eng",))  # the fixture's folders
    assert device_kit.main(["--parts", "ner"]) == 0
    assert "site.tar.gz" in capsys.readouterr().out
    wheels = kit / ".device" / "wheels"
    assert not list(wheels.glob("jieba-*.whl"))
    unpacked = tmp_path / "site"
    with tarfile.open(kit / ".device" / "site.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["embedding/__init__.py", "embedding/m3e-small/config.json",
                                          "embedding/m3e-small/model.safetensors",
                                          "embedding/m3e-small/tokenizer.json", "jieba/__init__.py",
                                          "jieba/dict.txt"]
        tar.extractall(unpacked, filter="data")
    assert (unpacked / "embedding" / "__init__.py").read_bytes() == b""
    assert (unpacked / "jieba" / "dict.txt").read_text(encoding="utf-8") == "中国 10 ns\n北京 5 ns\n"
    original = torch.load(kit / "m3e-small" / "pytorch_model.bin", weights_only=True)
    loaded = AutoModel.from_pretrained(str(unpacked / "embedding" / "m3e-small"), local_files_only=True).state_dict()
    floats = [k for k, v in original.items() if v.is_floating_point()]
    assert floats and all(loaded[k].dtype == torch.float32 for k in floats)
    assert all(torch.equal(loaded[k], original[k].half().float()) for k in floats)
    assert any(not torch.equal(loaded[k], original[k]) for k in floats)  # rounded, not the float32 weights


def test_a_kit_whose_lattices_segment_with_jieba_keeps_its_wheel_and_carries_no_site(kit):
    assert device_kit.main(["--parts", "mt"]) == 0
    assert len(list((kit / ".device" / "wheels").glob("jieba-*.whl"))) == 1
    assert not (kit / ".device" / "site.tar.gz").exists()


def tiny_tvsub(data, pairs_per_episode):
    folder = data / "tvsub_zh_en"
    (folder / "train").mkdir(parents=True)
    (folder / "test").mkdir()
    (folder / "test" / "test.orignal.zh").write_text("你好\n", encoding="utf-8")
    for episode, pairs in pairs_per_episode.items():
        (folder / "train" / f"{episode}.zh").write_text("".join(f"句{i}\n" for i in range(pairs)), encoding="utf-8")
        (folder / "train" / f"{episode}.en").write_text("".join(f"s{i}\n" for i in range(pairs)), encoding="utf-8")
    (folder / "EPISODES.txt").write_text("".join(f"{e}\n" for e in pairs_per_episode), encoding="utf-8")


def test_a_kit_that_reads_only_tvsubs_first_pairs_carries_the_episodes_that_hold_them(kit, monkeypatch, capsys):
    """The throughput part (train_throughput.py --instances): the listing names the first episodes
    whose files hold FIRST_PAIRS pairs, in the listing's order, and only their files travel; the
    other folders of tvsub_zh_en travel whole. Beside a part that reads it all, tvsub travels whole."""
    (kit / "data" / "tvsub_zh_en" / "part.txt").unlink()
    (kit / "data" / "tvsub_zh_en").rmdir()
    tiny_tvsub(kit / "data", {"7": 3, "2": 4, "9": 5, "4": 6})
    monkeypatch.setitem(device_kit.FOLDERS, "ner", ("tatoeba_cmn_eng",))  # the fixture's folders
    monkeypatch.setitem(device_kit.FOLDERS, "throughput", ("tvsub_zh_en",))
    monkeypatch.setitem(device_kit.FIRST_PAIRS, "throughput", 7)
    assert device_kit.main(["--parts", "throughput", "ner"]) == 0
    assert "tvsub_zh_en: its first 7 pairs" in capsys.readouterr().out
    with tarfile.open(kit / ".device" / "data.tar.gz") as tar:
        files = sorted(m.name for m in tar.getmembers() if m.isfile())
        listing = tar.extractfile("data/tvsub_zh_en/EPISODES.txt").read().decode()
    assert listing == "7\n2\n"  # 3 + 4 pairs: the reader's first 7, and no episode more
    assert [f[len("data/tvsub_zh_en/"):] for f in files if "tvsub" in f] == [
        "EPISODES.txt", "test/test.orignal.zh", "train/2.en", "train/2.zh", "train/7.en", "train/7.zh"]
    assert "data/tatoeba_cmn_eng/part.txt" in files
    with tarfile.open(kit / ".device" / "data.tar.gz") as tar:
        tar.extractall(kit / "unpacked", filter="data")
    reader = TvsubReader(max_instances=7)
    pairs = [(i["episode"], i["source"]) for i in reader.read(str(kit / "unpacked/data/tvsub_zh_en/EPISODES.txt"))]
    assert pairs == [("7", f"句{i}") for i in range(3)] + [("2", f"句{i}") for i in range(4)]

    assert device_kit.main(["--parts", "throughput", "mt"]) == 0
    assert "its first" not in capsys.readouterr().out
    with tarfile.open(kit / ".device" / "data.tar.gz") as tar:
        assert tar.extractfile("data/tvsub_zh_en/EPISODES.txt").read().decode() == "7\n2\n9\n4\n"
        assert len([n for n in tar.getnames() if "/train/" in n]) == 8


def test_the_calls_printed_fit_the_limits_device_session_sh_sets():
    """Each part's default limit is read from device_session.sh itself; parts whose limits add up to
    more than one call are printed as one call per part, each with its own settings."""
    limits = device_kit.part_limits()
    assert limits == {"checks": 240, "speed": 150, "mt": 480, "lb": 540, "lbert": 540, "ner": 540, "throughput": 150}
    assert device_kit.call_lines(["throughput", "ner"])[:2] == [
        'device run 1 of 2: command "bash benchmarks/device_session.sh throughput", carry [".device"], timeout_s 190 '
        '(device_session.sh names each setting; N, S: what the time allows)',
        'device run 2 of 2: command "bash benchmarks/device_session.sh ner", carry [".device"], timeout_s 580 '
        '(device_session.sh names each setting; N, S: what the time allows)']
    # 240 + 150 s would leave mt 180 s of a call, under MT_LEAST_S: three calls, and mt's pairs are not sized
    # from a plan_mt line of another call's log
    assert [line.split('"')[1] for line in device_kit.call_lines(["checks", "speed", "mt"])[:3]] == [
        "bash benchmarks/device_session.sh checks", "bash benchmarks/device_session.sh speed",
        "SESSION_S=570 MT_SEEDS=3 bash benchmarks/device_session.sh mt"]
    assert [line.split('"')[1] for line in device_kit.call_lines(["checks", "mt"])] == [
        "SESSION_S=570 MT_PAIRS=auto MT_BATCH_PAIRS=350 MT_SEEDS=3 bash benchmarks/device_session.sh checks mt"]


def test_merge_refuses_an_archive_it_cannot_read_in_one_line(tmp_path, capsys):
    (tmp_path / "notgz.tar.gz").write_text("notgz")
    (tmp_path / "empty.tar.gz").write_bytes(b"")
    (tmp_path / "a.txt").write_text("hi")
    for name, member in (("outside.tar.gz", "../a.txt"), ("link.tar.gz", "link")):
        with tarfile.open(tmp_path / name, "w:gz") as tar:
            info = tarfile.TarInfo(member)
            if member == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = 2
                tar.addfile(info, io.BytesIO(b"hi"))
    export = tmp_path / "out" / "export.json"
    for name, why in (("notgz.tar.gz", "ReadError"), ("empty.tar.gz", "ReadError"), ("missing.tar.gz", "FileNotFound"),
                      ("outside.tar.gz", "OutsideDestinationError"), ("link.tar.gz", "AbsoluteLinkError")):
        assert device_kit.merge(tmp_path / name, export) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {tmp_path / name}: not an archive a device call brought back ({why}")
        assert err.count("\n") == 1
    assert not export.parent.exists() and (tmp_path / "a.txt").read_text() == "hi"
