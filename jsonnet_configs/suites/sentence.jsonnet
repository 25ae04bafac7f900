// The sentence table of benchmarks/RESULTS.md (ChnSentiCorp, BQ, THUCNews, CMRC 2018): every row's spec, seeds and
// configuration ([tag] overrides) as the committed board (benchmarks/results/leaderboard.json) has them.
//   multigrain suite jsonnet_configs/suites/sentence.jsonnet [--only 'resume_*'] [--dry-run]
//   multigrain suite jsonnet_configs/suites/sentence.jsonnet --check
// *_vec specs read the SGNS vectors of `python benchmarks/pretrain_vectors.py` (runs/vectors/);
// *_m3e_* specs need the optional extra multigrain[m3e].
local vectors = { vectors: 'runs/vectors' };
// BQ over m3e-small at a CPU budget: the first 20,000 of the 100,000 training pairs, the spec's 2
// epochs, the whole dev and test sets (their own readers, without the training reader's limit).
local bq20k = ['+dataset_reader.max_instances=20000', '+validation_dataset_reader={"type": "bq_corpus"}',
               '+test_dataset_reader={"type": "bq_corpus"}'];
// a smaller first look on a busy CPU: 10,000 pairs, one epoch
local bq10k = ['+dataset_reader.max_instances=10000', '+validation_dataset_reader={"type": "bq_corpus"}',
               '+test_dataset_reader={"type": "bq_corpus"}', 'trainer.num_epochs=1'];
// MWA and HRMF read segmentations, which a reader without the spec's lattice_builder does not give:
// they keep the spec's reader for every split, whose cut leaves BQ's dev and test (10,000 pairs
// each) whole
local bq10k_seg = ['+dataset_reader.max_instances=10000', 'trainer.num_epochs=1'];
local bq20k_seg = ['+dataset_reader.max_instances=20000'];
{
  description: 'the sentence table of benchmarks/RESULTS.md (ChnSentiCorp, BQ, THUCNews, CMRC 2018)',
  entries: [
    { spec: '../cls/chnsenticorp_backbone.jsonnet', seeds: [13, 14, 15],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=4"] } },
    { spec: '../cls/chnsenticorp_big.jsonnet', seeds: [13, 14, 15],
      overrides: ["trainer.num_epochs=40"] },
    { spec: '../cls/chnsenticorp_big.jsonnet', seeds: [13],
      configs: { "bs32-e10": ["data_loader.batch_size=32", "trainer.optimizer.lr=5e-4", "trainer.patience=3", "trainer.num_epochs=10"] } },
    { spec: '../cls/chnsenticorp_big.jsonnet', seeds: [13, 14, 15],
      configs: { "bs32-e20": ["data_loader.batch_size=32", "trainer.optimizer.lr=5e-4", "trainer.patience=3", "trainer.num_epochs=20"] } },
    { spec: '../cls/chnsenticorp_big.jsonnet', seeds: [13, 14, 15],
      configs: { "e20": ["trainer.num_epochs=20"] } },
    { spec: '../cls/chnsenticorp_big.jsonnet', seeds: [13, 14, 15],
      configs: { "lr1e-3": ["trainer.optimizer.lr=1e-3", "trainer.num_epochs=40"] } },
    { spec: '../cls/chnsenticorp_big_m3e_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      overrides: ["trainer.num_epochs=40"] },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      overrides: ["trainer.num_epochs=40"] },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      configs: { "bs32-e10": ["data_loader.batch_size=32", "trainer.optimizer.lr=5e-4", "trainer.patience=3", "trainer.num_epochs=10"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      configs: { "bs32-e20": ["data_loader.batch_size=32", "trainer.optimizer.lr=5e-4", "trainer.patience=3", "trainer.num_epochs=20"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      configs: { "bs32-e30": ["data_loader.batch_size=32", "trainer.optimizer.lr=5e-4", "trainer.patience=3", "trainer.num_epochs=30"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      configs: { "drop3-e20": ["model.encoder={\"type\":\"big\",\"dropout\":0.3}", "model.embedder.dropout=0.3", "trainer.num_epochs=20"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      configs: { "e20": ["trainer.num_epochs=20"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19], ext_vars: vectors,
      configs: { "ema-e20": ["trainer={\"num_epochs\":20,\"optimizer\":{\"type\":\"adamw\",\"lr\":7e-4,\"weight_decay\":0.01},\"scheduler\":{\"type\":\"linear_warmup\",\"warmup_fraction\":0.1},\"grad_clipping\":1.0,\"patience\":5,\"validation_metric\":\"+accuracy\",\"moving_average\":0.995}"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15, 16], ext_vars: vectors,
      configs: { "ema-e20-h6": ["trainer={\"num_epochs\":20,\"optimizer\":{\"type\":\"adamw\",\"lr\":7e-4,\"weight_decay\":0.01},\"scheduler\":{\"type\":\"linear_warmup\",\"warmup_fraction\":0.1},\"grad_clipping\":1.0,\"patience\":5,\"validation_metric\":\"+accuracy\",\"moving_average\":0.995}", "model.encoder={\"type\":\"big\",\"hidden_size\":240,\"num_heads\":6}"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15, 16], ext_vars: vectors,
      configs: { "ema-e20-h6-bigram": ["trainer={\"num_epochs\":20,\"optimizer\":{\"type\":\"adamw\",\"lr\":7e-4,\"weight_decay\":0.01},\"scheduler\":{\"type\":\"linear_warmup\",\"warmup_fraction\":0.1},\"grad_clipping\":1.0,\"patience\":5,\"validation_metric\":\"+accuracy\",\"moving_average\":0.995}", "model.encoder={\"type\":\"big\",\"hidden_size\":240,\"num_heads\":6}", "model.embedder={\"type\":\"char_bigram\",\"char_dim\":50,\"bigram_dim\":50,\"dropout\":0.1,\"char_pretrained_file\":\"runs/vectors/chars.vec\",\"bigram_pretrained_file\":\"runs/vectors/bigrams.vec\"}", "vocabulary.pretrained_files={\"chars\":\"runs/vectors/chars.vec\",\"bigrams\":\"runs/vectors/bigrams.vec\"}"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: { vectors: 'runs/vectors300' },
      configs: { "ema-e20-h6-v300": ["trainer={\"num_epochs\":20,\"optimizer\":{\"type\":\"adamw\",\"lr\":7e-4,\"weight_decay\":0.01},\"scheduler\":{\"type\":\"linear_warmup\",\"warmup_fraction\":0.1},\"grad_clipping\":1.0,\"patience\":5,\"validation_metric\":\"+accuracy\",\"moving_average\":0.995}", "model.encoder={\"type\":\"big\",\"hidden_size\":240,\"num_heads\":6}", "model.embedder.char_dim=300"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      configs: { "lr1e-3": ["trainer.optimizer.lr=1e-3", "trainer.num_epochs=40"] } },
    { spec: '../cls/chnsenticorp_big_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors,
      configs: { "lr1e-3-e20": ["trainer.optimizer.lr=1e-3", "trainer.num_epochs=20"] } },
    { spec: '../cls/chnsenticorp_hrmf.jsonnet', seeds: [13, 14, 15],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=4"] } },
    { spec: '../cls/chnsenticorp_m3e_backbone.jsonnet', seeds: [13, 14, 15],
      overrides: ["trainer.num_epochs=2"] },
    { spec: '../cls/chnsenticorp_m3e_big.jsonnet', seeds: [13, 14, 15],
      overrides: ["trainer.num_epochs=2"] },
    { spec: '../cls/chnsenticorp_m3e_hrmf.jsonnet', seeds: [13, 14, 15],
      overrides: ["trainer.num_epochs=2"] },
    { spec: '../cls/chnsenticorp_m3e_mwa.jsonnet', seeds: [13, 14, 15],
      overrides: ["trainer.num_epochs=2"] },
    { spec: '../cls/chnsenticorp_mwa.jsonnet', seeds: [13, 14, 15],
      configs: { "small-query": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "model.encoder.pool_over=query", "trainer.num_epochs=4"] } },
    { spec: '../cls/thucnews_backbone.jsonnet', seeds: [13, 14, 15],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=10"] } },
    { spec: '../cls/thucnews_hrmf.jsonnet', seeds: [13, 14, 15],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=10"] } },
    { spec: '../cls/thucnews_mwa.jsonnet', seeds: [13, 14, 15],
      configs: { "small-query": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "model.encoder.pool_over=query", "trainer.num_epochs=10"] } },
    { spec: '../mrc/cmrc2018_backbone.jsonnet', seeds: [13],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=2"] } },
    { spec: '../pair/bq_m3e_backbone.jsonnet', seeds: [13, 14, 15], configs: { "20k": bq20k, "10k-e1": bq10k } },
    { spec: '../pair/bq_m3e_hrmf.jsonnet', seeds: [13, 14, 15], configs: { "20k": bq20k_seg, "10k-e1": bq10k_seg } },
    { spec: '../pair/bq_m3e_mwa.jsonnet', seeds: [13, 14, 15], configs: { "20k": bq20k_seg, "10k-e1": bq10k_seg } },
    { spec: '../pair/bq_backbone.jsonnet', seeds: [13, 14, 15],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=3"] } },
    { spec: '../pair/bq_hrmf.jsonnet', seeds: [13, 14, 15],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=3"] } },
    { spec: '../pair/bq_mwa.jsonnet', seeds: [13, 14, 15],
      configs: { "small": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "trainer.num_epochs=3"] } },
    { spec: '../pair/bq_mwa.jsonnet', seeds: [13, 14, 15],
      configs: { "small-query": ["model.embedder.num_layers=2", "model.embedder.hidden_size=128", "model.encoder.pool_over=query", "trainer.num_epochs=3"] } },
  ],
}
