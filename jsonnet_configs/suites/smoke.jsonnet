// Minutes on a 2-core CPU (`multigrain suite jsonnet_configs/suites/smoke.jsonnet`, two runs at a
// time on the local Ray): every task at a tiny size, 7 runs. NER: the quickstart BiLSTM-CRF, and the
// same with a smaller LSTM, 3 epochs on 1,000 Resume sentences, two seeds each; classification and
// sentence pairs: a 1-layer, 64-d character Transformer on 300 ChnSentiCorp reviews / BQ pairs;
// translation: the small Transformer on 300 TVsub pairs, greedy, scored on 20 sentences of each
// test set. Its rows are tagged [smoke] and [smoke-h50]: not the shipped specs' rows.
local tiny_backbone = { 'model.embedder.num_layers': 1, 'model.embedder.hidden_size': 64, 'trainer.num_epochs': 1,
                        '+dataset_reader.max_instances': 300 };
local mt_sets = ['tatoeba', 'tvsub', 'wmt18', 'wmt19', 'wmt20', 'wmt22'];
{
  description: 'a few-minute check that suites train, reuse, log and check, on every task',
  entries: [
    {
      spec: '../ner/resume_quickstart.jsonnet',
      seeds: [13, 14],
      overrides: { 'trainer.num_epochs': 3, '+dataset_reader.max_instances': 1000 },
      configs: { smoke: {}, 'smoke-h50': { 'model.encoder.hidden_size': 50 } },
      resources: { cpus: 1 },
    },
    { spec: '../cls/chnsenticorp_backbone.jsonnet', seeds: [13], configs: { smoke: tiny_backbone },
      resources: { cpus: 1 } },
    { spec: '../pair/bq_backbone.jsonnet', seeds: [13], configs: { smoke: tiny_backbone }, resources: { cpus: 1 } },
    {
      spec: '../mt/tvsub_transformer_small.jsonnet',
      seeds: [13],
      configs: { smoke: { 'trainer.num_epochs': 1, '+dataset_reader.max_instances': 300, 'model.beam_size': 1 } + {
        ['+test_sets.%s.reader.max_instances' % name]: 20
        for name in mt_sets
      } },
      resources: { cpus: 1 },
    },
  ],
}
