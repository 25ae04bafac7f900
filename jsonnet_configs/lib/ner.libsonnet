// Shared defaults for the NER specs. Paths are relative to the repository root (where
// `multigrain` is run); the data sets live in ../shared/data.
local data = '../shared/data';

{
  data_root:: data,

  datasets:: {
    resume: {
      reader: { type: 'resume_ner' },
      train: data + '/resume_ner/train.char.bmes',
      dev: data + '/resume_ner/dev.char.bmes',
      test: data + '/resume_ner/test.char.bmes',
    },
    weibo: {
      reader: { type: 'weibo_ner', entity_kind: 'all' },
      train: data + '/weibo_ner/weiboNER_2nd_conll.train',
      dev: data + '/weibo_ner/weiboNER_2nd_conll.dev',
      test: data + '/weibo_ner/weiboNER_2nd_conll.test',
    },
    msra: {
      // no official dev split: a deterministic 10% of train (see the msra_ner reader)
      reader: { type: 'msra_ner', split: 'train' },
      dev_reader: { type: 'msra_ner', split: 'dev' },
      test_reader: { type: 'msra_ner' },
      train: data + '/msra_ner/train1.txt',
      dev: data + '/msra_ner/train1.txt',
      test: data + '/msra_ner/test.char.bmes',
    },
  },

  // Adam with gradient clipping; the model specs override what their papers set.
  trainer(epochs=10, lr=2e-3):: {
    num_epochs: epochs,
    optimizer: { type: 'adam', lr: lr },
    grad_clipping: 5.0,
    patience: 5,
    validation_metric: '+f1',
  },

  // A complete NER spec for `dataset` with the given model section.
  spec(dataset, model, trainer=$.trainer(), batch_size=32, lattice=null):: {
    local d = $.datasets[dataset],
    task: 'ner',
    dataset: dataset,
    dataset_reader: d.reader + (if lattice == null then {} else { lattice_builder: lattice }),
    [if std.objectHas($.datasets[dataset], 'dev_reader') then 'validation_dataset_reader']:
      d.dev_reader + (if lattice == null then {} else { lattice_builder: lattice }),
    [if std.objectHas($.datasets[dataset], 'test_reader') then 'test_dataset_reader']:
      d.test_reader + (if lattice == null then {} else { lattice_builder: lattice }),
    train_data_path: d.train,
    validation_data_path: d.dev,
    test_data_path: d.test,
    data_loader: { batch_size: batch_size },
    model: model,
    trainer: trainer,
    seed: 13,
  },

  bilstm_crf:: {
    type: 'tagger',
    embedder: { type: 'char_bigram', char_dim: 50, bigram_dim: 50, dropout: 0.5 },
    encoder: { type: 'bilstm', hidden_size: 200 },
    head: { type: 'crf' },
  },
}
