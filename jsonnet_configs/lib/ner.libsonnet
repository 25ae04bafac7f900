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

  // A data set of your own, for `spec`: its name (the MLflow experiment is ner/<name>), the
  // reader of its training file, its files (paths relative to where `multigrain` runs), and the
  // readers of the validation and test files, which default to `reader` (not to each other).
  // A `reader` that keeps a hash-bucket split (split: 'train') needs both given explicitly.
  dataset(name, reader, train, validation, test=null, validation_reader=null, test_reader=null)::
    local splits = std.objectHas(reader, 'split') && reader.split != 'all';
    assert !splits || (validation_reader != null && (test == null || test_reader != null)) :
      "ner.dataset('%s'): the reader keeps split '%s'; give validation_reader and test_reader too" % [name, reader.split];
    {
      name: name,
      reader: reader,
      dev_reader: if validation_reader == null then reader else validation_reader,
      [if test != null then 'test_reader']: if test_reader == null then reader else test_reader,
      train: train,
      dev: validation,
      [if test != null then 'test']: test,
    },

  // A complete NER spec for `dataset` (a name in `datasets`, or a `dataset(...)`) with the given
  // model section.
  spec(dataset, model, trainer=$.trainer(), batch_size=32, lattice=null)::
    local d = if std.isString(dataset) then $.datasets[dataset] else dataset;
    {
      task: 'ner',
      dataset: if std.isString(dataset) then dataset else d.name,
      dataset_reader: d.reader + (if lattice == null then {} else { lattice_builder: lattice }),
      [if std.objectHas(d, 'dev_reader') then 'validation_dataset_reader']:
        d.dev_reader + (if lattice == null then {} else { lattice_builder: lattice }),
      [if std.objectHas(d, 'test_reader') then 'test_dataset_reader']:
        d.test_reader + (if lattice == null then {} else { lattice_builder: lattice }),
      train_data_path: d.train,
      validation_data_path: d.dev,
      [if std.objectHas(d, 'test') then 'test_data_path']: d.test,
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
