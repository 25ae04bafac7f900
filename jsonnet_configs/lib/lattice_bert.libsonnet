// Lattice-BERT (Lai et al. 2021) and its character BERT baseline: model sizes, the pre-training
// corpus, pre-training specs and fine-tuning specs. Paths are relative to the repository root.
//
// Pre-training: `multigrain train jsonnet_configs/pretrain/lattice_bert_tiny.jsonnet -s RUN`.
// Fine-tuning: `multigrain train jsonnet_configs/finetune/resume_ner.jsonnet --ext-var pretrained=RUN`
// (RUN = a pre-training run directory: its best.pt initialises embedder and encoder, its
// vocabulary/ is the fine-tuning vocabulary, so token ids mean what they meant in pre-training).
local data = '../shared/data';
local ner = import 'ner.libsonnet';
local sentence = import 'sentence.libsonnet';

{
  data_root:: data,

  // the paper's sizes (Table 4; tiny is ours): embedding E, hidden d, layers, heads; FFN 4d
  sizes:: {
    tiny: { embedding: 128, hidden: 256, layers: 4, heads: 4 },
    lite: { embedding: 128, hidden: 512, layers: 6, heads: 8 },
    base: { embedding: 128, hidden: 768, layers: 12, heads: 12 },
  },

  // every lexicon word of the sentence (jieba's dictionary, 2..10 characters): the lattice
  lexicon:: { type: 'lexicon' },

  // The default pre-training corpus: every Chinese text under ../shared/data that is not a dev or
  // test split (character counts: benchmarks/RESULTS.md, "Lattice-BERT").
  sources:: [
    { path: 'resume_ner/train.char.bmes', reader: { type: 'resume_ner' } },
    { path: 'weibo_ner/weiboNER_2nd_conll.train', reader: { type: 'weibo_ner', entity_kind: 'all' } },
    { path: 'msra_ner/train1.txt', reader: { type: 'msra_ner', split: 'train' } },
    { path: 'chnsenticorp/train.tsv', reader: { type: 'chnsenticorp' } },
    { path: 'bq_corpus/train.txt', reader: { type: 'bq_corpus' }, fields: ['chars_a', 'chars_b'] },
    { path: 'cmrc2018/cmrc2018_train.json', reader: { type: 'cmrc2018' }, fields: ['context_chars'] },
    { path: 'tatoeba_cmn_eng/cmn.txt', reader: { type: 'tatoeba_cmn_eng', split: 'train' } },
    // an episode's lines are consecutive subtitles: a document (SOP pairs of consecutive lines)
    { path: 'tvsub_zh_en/train/*.zh', document: true },
  ],

  // SOP pairs within one text (two consecutive pieces of at most 62 characters, or the halves of
  // one): [CLS] a [SEP] b [SEP] fits 128 positions
  corpus(split='train', max_chars=null, num_shards=1, shard_index=0, max_instances=null):: {
    type: 'text_corpus', sources: $.sources, lattice_builder: $.lexicon, pairs: true, max_chars_per_text: 62,
    split: split, num_shards: num_shards, shard_index: shard_index, max_chars: max_chars,
    [if max_instances != null then 'max_instances']: max_instances,
  },

  embedder(size, words=true, pretrained=null):: {
    type: 'lattice_tokens', embedding_dim: $.sizes[size].embedding, words: words,
    [if pretrained != null then 'pretrained']: pretrained,
  },

  // encoder: 'lattice_bert' or 'char_bert'; cls: 'first' (a packed [CLS]) or 'prepend' (tagger)
  encoder(size, encoder='lattice_bert', cls='first', pretrained=null, flags={}):: {
    type: encoder, hidden_size: $.sizes[size].hidden, num_layers: $.sizes[size].layers,
    num_heads: $.sizes[size].heads, dropout: 0.1, attention_dropout: 0.1, cls: cls,
    [if pretrained != null then 'pretrained']: pretrained,
  } + flags,

  // A pre-training spec. chars_budget: characters of the corpus read (the budget of a run is
  // chars_budget x epochs; on the command line -o dataset_reader.max_chars=N); masking
  // 'segment' (MSP) or 'token' (the paper's -MSP); flags: encoder ablations (use_distance: false...).
  pretrain(size='tiny', encoder='lattice_bert', masking='segment', epochs=1, batch_size=64, lr=6e-4,
           chars_budget=null, flags={}):: {
    local words = encoder == 'lattice_bert',
    task: 'pretrain',
    dataset: 'corpus',
    dataset_reader: $.corpus('train', chars_budget),
    validation_dataset_reader: $.corpus('dev', max_instances=500),
    train_data_path: data,
    validation_data_path: data,
    evaluate_on_test: false,
    vocabulary: { min_count: { words: 2 }, max_size: { words: 60000 } },
    data_loader: { batch_size: batch_size },
    model: {
      type: 'pretrainer', masking: masking, use_words: words, max_length: 128,
      embedder: $.embedder(size, words),
      encoder: $.encoder(size, encoder, 'first', flags=flags),
    },
    trainer: {
      num_epochs: epochs,
      optimizer: { type: 'adamw', lr: lr, weight_decay: 0.01, eps: 1e-6 },
      scheduler: { type: 'linear_warmup', warmup_fraction: 0.05 },
      grad_clipping: 1.0,
      validation_metric: '+msp_accuracy',
    },
    seed: 13,
  },

  // A fine-tuning spec: task one of resume, msra (NER: character positions, softmax tags),
  // chnsenticorp, thucnews, bq (classes from [CLS]), cmrc2018 (spans over character positions);
  // run = the pre-training run directory.
  finetune(task, run, size='tiny', encoder='lattice_bert', epochs=5, lr=1e-4, batch_size=32):: (
    local words = encoder == 'lattice_bert';
    local lattice = if words then $.lexicon else null;
    local embedder = $.embedder(size, words, run);
    local vocabulary = { vocabulary: { directory: run + '/vocabulary' } };
    local trainer = {
      num_epochs: epochs,
      optimizer: { type: 'adamw', lr: lr, weight_decay: 0.01 },
      scheduler: { type: 'linear_warmup', warmup_fraction: 0.1 },
      grad_clipping: 1.0,
    };
    if task == 'resume' || task == 'msra' then
      ner.spec(task, {
        type: 'tagger', embedder: embedder, encoder: $.encoder(size, encoder, 'prepend', run),
        head: { type: 'softmax_tagger' },
      }, trainer + { validation_metric: '+f1', patience: 3 }, batch_size, lattice) + vocabulary
    else
      local d = sentence.datasets[task];
      local with_lattice(r) = r + (if words then { lattice_builder: $.lexicon } else {});
      {
        task: d.task,
        dataset: d.name,
        dataset_reader: with_lattice(d.reader),
        [if std.objectHas(d, 'dev_reader') then 'validation_dataset_reader']: with_lattice(d.dev_reader),
        [if std.objectHas(d, 'test_reader') then 'test_dataset_reader']: with_lattice(d.test_reader),
        train_data_path: d.train,
        validation_data_path: d.dev,
        test_data_path: d.test,
        data_loader: { batch_size: batch_size },
        model: {
          type: d.model, max_length: d.max_length, embedder: embedder,
          encoder: $.encoder(size, encoder, 'first', run),
          head: if d.task == 'mrc' then { type: 'span', max_answer_length: 64 } else { type: 'classifier', pooling: 'cls' },
          [if d.task != 'mrc' then 'labels']: d.labels,
          [if d.task == 'mrc' then 'max_query_length']: 64,
          [if d.task == 'mrc' then 'doc_stride']: 128,
        },
        trainer: trainer + { validation_metric: if d.task == 'mrc' then '+f1' else '+accuracy', patience: 3 },
        seed: 13,
      } + vocabulary
  ),
}
