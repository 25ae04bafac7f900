// Shared defaults of the zh->en translation specs (task `mt`). Paths are relative to the repository
// root; data in ../shared/data (SOURCES.md: the TVsub and WMT22 rows).
//
// A translator = a source encoder over Chinese characters (the character `transformer`, or `big`
// over the lattice of characters + lexicon words, as the BiG-Transformer paper's NMT encoder) and
// the same `nmt_decoder` (Transformer decoder, tied target embeddings, label smoothing, beam
// search). Both encoders get the same sizes, decoder, data, batches and number of epochs: the
// encoder is the only difference between tvsub_transformer and tvsub_big.
//
// Test sets (one leaderboard experiment each, mt/<name>, ranked by BLEU; platform/test_sets.py):
//   tvsub   TVsub test, 1,154 sentences x 3 references (lower-cased: ranked by case-insensitive BLEU)
//   wmt22   WMT22 general test, 1,875 segments x 2 references (A, B)
//   wmt18/19/20  WMT newstest, 1 reference each
//   tatoeba the Tatoeba reader's deterministic test split (1,373 pairs)
// Cased references (WMT, Tatoeba) are ranked by cased BLEU, as WMT reports it, the lower-cased
// one beside it (components/metrics/bleu.py). `multigrain evaluate RUN --test-set tvsub` scores a
// set as the training does (every reference); a bare `evaluate RUN test.orignal.zh` has one.
// News and Tatoeba are out of domain for subtitle training: expect low scores there.
local data = '../shared/data';
local tvsub = data + '/tvsub_zh_en';
local wmt22 = data + '/wmt22_generaltest_zh_en/generaltest2022.zh-en';

{
  data_root:: data,

  // Model sizes. `base`: Transformer base (Vaswani et al. 2017) for a GPU; `small`: for CPU budgets.
  // epochs/batch_size/lr are the trainer budget of each size (the same for both encoders).
  sizes:: {
    base: { dim: 512, layers: 6, heads: 8, ffn: 2048, dropout: 0.1, target_vocab: 8000,
            batch_size: 128, epochs: 20, lr: 5e-4 },
    small: { dim: 256, layers: 3, heads: 4, ffn: 1024, dropout: 0.1, target_vocab: 8000,
             batch_size: 64, epochs: 10, lr: 7e-4 },
    // for quick checks only (tatoeba_tiny)
    tiny: { dim: 64, layers: 1, heads: 2, ffn: 128, dropout: 0.1, target_vocab: 1000,
            batch_size: 32, epochs: 2, lr: 2e-3 },
  },

  // BiG: every lexicon word of the sentence (jieba's dictionary; see components/lattice/).
  big_lattice:: { type: 'lexicon' },

  with_lattice(reader, encoder):: reader + (if encoder == 'big' then { lattice_builder: $.big_lattice } else {}),

  // The test sets; `encoder` 'big' adds the lattice builder to each reader.
  test_sets(encoder):: {
    tvsub: { path: tvsub + '/test/test.orignal.zh',
             reader: $.with_lattice({ type: 'tvsub', references: [tvsub + '/processed/test/test_trg.sgm'] }, encoder) },
    wmt22: { path: wmt22 + '.src.zh',
             reader: $.with_lattice({ type: 'parallel_refs', references: [wmt22 + '.ref.A.en', wmt22 + '.ref.B.en'] },
                                    encoder) },
    wmt18: { path: data + '/wmt_newstest_zh_en/damo_mt_testsets_zh2en_news_wmt18.csv',
             reader: $.with_lattice({ type: 'wmt_newstest' }, encoder) },
    wmt19: { path: data + '/wmt_newstest_zh_en/damo_mt_testsets_zh2en_news_wmt19.csv',
             reader: $.with_lattice({ type: 'wmt_newstest' }, encoder) },
    wmt20: { path: data + '/wmt_newstest_zh_en/damo_mt_testsets_zh2en_news_wmt20.csv',
             reader: $.with_lattice({ type: 'wmt_newstest' }, encoder) },
    tatoeba: { path: data + '/tatoeba_cmn_eng/cmn.txt',
               reader: $.with_lattice({ type: 'tatoeba_cmn_eng', split: 'test' }, encoder) },
  },

  encoder(name, s):: {
    type: name, hidden_size: s.dim, num_layers: s.layers, num_heads: s.heads, ffn_dim: s.ffn,
    dropout: s.dropout, attention_dropout: s.dropout, max_length: 1024,
  },

  // `bleu`: the BLEU metric's options (components/metrics/bleu.py), e.g. { nist_bp: true } for
  // mteval-v13a's brevity penalty (the shortest reference); null (the default) adds no key, so
  // the specs' hashes stay as they were. `-o` cannot add a key: pass it here.
  model(encoder, s, bleu=null):: {
    type: 'translator',
    embedder: { type: 'char_bigram', char_dim: s.dim, bigram_dim: 0, dropout: s.dropout },
    encoder: $.encoder(encoder, s),
    decoder: { type: 'nmt_decoder', num_layers: s.layers, num_heads: s.heads, feedforward_dim: s.ffn,
               dropout: s.dropout, label_smoothing: 0.1 },
    target_vocab_size: s.target_vocab,
    beam_size: 4,
    length_penalty: 0.6,
    max_length_ratio: 1.5,
    max_length_offset: 10,
    // max_source_length counts source tokens (a character, or a run of ASCII letters/digits).
    // Measured on the shipped data (characters, not UTF-8 bytes): TVsub sources are at most 66
    // characters (154 bytes), WMT22's longest multi-sentence segment 299 (880 bytes; 298 tokens).
    // None reaches 1,000; a longer one is cut (truncate) rather than refused, and the cut is
    // reported: its prediction says "truncated": true, and evaluate counts the cut sources.
    max_source_length: 1000,
    truncate: true,
  } + (if bleu == null then {} else { bleu: bleu }),

  // Adam with linear warm-up and decay; `trainer.mixed_precision` is left to the trainer's default.
  // Warm-up is a share of the run (6 %: ~4,000 steps at the base and small full budgets), so that a
  // run cut to fewer epochs or pairs still spends most of its steps past it.
  trainer(s, epochs=null):: {
    num_epochs: if epochs == null then s.epochs else epochs,
    optimizer: { type: 'adam', lr: s.lr, betas: [0.9, 0.98] },
    scheduler: { type: 'linear_warmup', warmup_fraction: 0.06 },
    grad_clipping: 1.0,
    patience: 5,
    validation_metric: '+bleu',
  },

  // TVsub training (429,501 pairs, episode order), validation on TVsub dev (1,086 pairs, 1 reference),
  // every test set above. `encoder`: 'transformer' | 'big'; `size`: a key of `sizes`.
  tvsub_spec(encoder, size='small', epochs=null, bleu=null):: {
    local s = $.sizes[size],
    task: 'mt',
    dataset: 'tvsub',
    dataset_reader: $.with_lattice({ type: 'tvsub' }, encoder),
    train_data_path: tvsub + '/EPISODES.txt',
    validation_data_path: tvsub + '/dev/dev.orignal.zh',
    test_sets: $.test_sets(encoder),
    data_loader: { batch_size: s.batch_size },
    model: $.model(encoder, s, bleu),
    trainer: $.trainer(s, epochs),
    seed: 13,
  },
}
