// Minutes on a 2-core CPU: the quickstart BiLSTM-CRF for 3 epochs on 1,000 Resume sentences, two
// seeds, and the same with a smaller LSTM: `multigrain suite jsonnet_configs/suites/smoke.jsonnet`.
// Its rows are tagged [smoke] and [smoke-h50]: not the quickstart's row.
{
  description: 'a few-minute check that suites train, reuse and log',
  entries: [
    {
      spec: '../ner/resume_quickstart.jsonnet',
      seeds: [13, 14],
      overrides: { 'trainer.num_epochs': 3, '+dataset_reader.max_instances': 1000 },
      configs: { smoke: {}, 'smoke-h50': { 'model.encoder.hidden_size': 50 } },
      resources: { cpus: 1 },
    },
  ],
}
