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

  // tvsub_*_small_cpu: about 40 minutes of one core of this 2-core machine. 2 epochs over the first
  // 180,000 TVsub pairs in length-bucketed token batches of at most 1,536 source + target tokens
  // (padding counted; ~64 pairs a batch, as the first recipe's, but 74 % of a batch's tokens are
  // real against 49 % in random batches of 64: ~1.5x the pairs in the same time), ~5,600 updates,
  // peak rate 1.5e-3 after 400 warm-up steps. The first recipe (120,000 pairs, random batches of 64,
  // peak 1e-3 after 500 steps; 0.65 s of process CPU per update) gave 2.43 BLEU (RESULTS.md). Two
  // epochs rather than one: the run keeps a checkpoint halfway (resumable on a loaded machine).
  // Measured, these specs take ~50 CPU-minutes; the mt suite's `[scaled-150k]` configuration of them
  // (the encoder's input scaled, 150,000 pairs) fits 40 and is the recipe RESULTS.md reports.
  cpu40:: { pairs: 180000, epochs: 2, batch: { batch_size: 256, max_tokens: 1536 },
            recipe: { lr: 1.5e-3, warmup_steps: 400, dropout: 0.0 } },

  // tvsub_*_small_gpu (the device call of issue 40: six trainings side by side on one GPU, about
  // 9 minutes): one epoch of all 429,501 pairs in token batches (data_loader.max_tokens: source +
  // target tokens, padding counted; ~8,192 is ~350 pairs, ~1,230 updates), bf16 where the GPU has
  // it (mixed_precision 'auto': float32 on a CPU, so the same spec rehearses there); decoding in
  // batches of 128 sources (a WMT22 batch of long segments x beam 4 stays small on the GPU).
  gpu:: { epochs: 1, max_tokens: 8192, batch_size: 1024, eval_batch_size: 128,
          recipe: { lr: 1.5e-3, warmup_steps: 300, dropout: 0.0, scale_embeddings: true, pack_targets: true } },

  // Recipes: how a size is trained. `null` (the shipped tvsub_* specs): post-norm, warm-up a share
  // of the run, the size's batch and rate; their spec hashes and results stay as they were.
  // `fast` (issue 40, "recipes that learn in few steps"): pre-norm encoder and decoder (each with a
  // final LayerNorm), Adam at a higher peak rate with an inverse-square-root schedule whose warm-up
  // is a number of steps (it never reads the run's length: a run can be extended),
  // `scale_embeddings` (the encoder's character vectors times sqrt(d), as Vaswani et al. scale
  // embeddings: unscaled their norm is about 1/11 of the position vectors' at d = 256; RESULTS.md,
  // "Why the base translator learned nothing"), and
  // `dropout` for both dropouts (0 where the budget is about one pass over the data: each pair
  // is seen once or twice, the model underfits, dropout only slows it), and `pack_targets` (the
  // decoder's layers compute only the non-padding target positions in training and its tied table's
  // gradient is made once: the same function, other dropout draws; RESULTS.md, "Trainer throughput").
  // Fields left out keep the size's value.
  recipes:: {
    fast: { pre_norm: true, lr: 1e-3, warmup_steps: 500, dropout: null, scale_embeddings: false,
            pack_targets: false },
  },

  encoder(name, s, recipe=null):: {
    type: name, hidden_size: s.dim, num_layers: s.layers, num_heads: s.heads, ffn_dim: s.ffn,
    dropout: s.dropout, attention_dropout: s.dropout, max_length: 1024,
  } + (if recipe != null && recipe.pre_norm then { pre_norm: true } else {})
    + (if recipe != null && recipe.scale_embeddings then { scale_embeddings: true } else {}),

  // `bleu`: the BLEU metric's options (components/metrics/bleu.py), e.g. { nist_bp: true } for
  // mteval-v13a's brevity penalty (the shortest reference); null (the default) adds no key, so
  // the specs' hashes stay as they were. `-o` cannot add a key: pass it here.
  model(encoder, s, bleu=null, recipe=null):: {
    type: 'translator',
    embedder: { type: 'char_bigram', char_dim: s.dim, bigram_dim: 0, dropout: s.dropout },
    encoder: $.encoder(encoder, s, recipe),
    decoder: { type: 'nmt_decoder', num_layers: s.layers, num_heads: s.heads, feedforward_dim: s.ffn,
               dropout: s.dropout, label_smoothing: 0.1 }
             + (if recipe != null && recipe.pre_norm then { pre_norm: true } else {})
             + (if recipe != null && recipe.pack_targets then { pack_targets: true } else {}),
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
  trainer(s, epochs=null, recipe=null):: {
    num_epochs: if epochs == null then s.epochs else epochs,
    optimizer: { type: 'adam', lr: if recipe == null then s.lr else recipe.lr, betas: [0.9, 0.98] },
    scheduler: if recipe == null then { type: 'linear_warmup', warmup_fraction: 0.06 }
               else { type: 'inverse_sqrt', warmup_steps: recipe.warmup_steps },
    grad_clipping: 1.0,
    patience: 5,
    validation_metric: '+bleu',
  },

  // TVsub training (429,501 pairs, episode order), validation on TVsub dev (1,086 pairs, 1 reference),
  // every test set above. `encoder`: 'transformer' | 'big'; `size`: a key of `sizes`.
  // `recipe`: null or a key of `recipes` (or an object of the same fields) merged over it;
  // `max_pairs`: the first N training pairs (episode order); `batch`: data_loader fields over the size's.
  tvsub_spec(encoder, size='small', epochs=null, bleu=null, recipe=null, max_pairs=null, batch={}):: {
    local r = if recipe == null then null
              else if std.isString(recipe) then $.recipes[recipe] else $.recipes.fast + recipe,
    local s0 = $.sizes[size],
    local s = if r != null && r.dropout != null then s0 { dropout: r.dropout } else s0,
    task: 'mt',
    dataset: 'tvsub',
    dataset_reader: $.with_lattice({ type: 'tvsub' }, encoder)
                    + (if max_pairs == null then {} else { max_instances: max_pairs }),
    [if max_pairs != null then 'validation_dataset_reader']: $.with_lattice({ type: 'tvsub' }, encoder),
    train_data_path: tvsub + '/EPISODES.txt',
    validation_data_path: tvsub + '/dev/dev.orignal.zh',
    test_sets: $.test_sets(encoder),
    data_loader: { batch_size: s.batch_size } + batch,
    model: $.model(encoder, s, bleu, r),
    trainer: $.trainer(s, epochs, r),
    seed: 13,
  },
}
