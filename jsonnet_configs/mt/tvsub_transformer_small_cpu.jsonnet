// Issue 40's CPU recipe: the `small` Transformer-encoder translator (3+3 layers of 256) trained for
// about 40 minutes of one core of this 2-core machine: 2 epochs over the first 120,000 TVsub pairs
// (3,750 updates of 64 pairs; mt.cpu40). Recipe `fast` (../lib/mt.libsonnet): pre-norm encoder and
// decoder, Adam at 1e-3 with an inverse-square-root schedule after 500 warm-up steps, no dropout
// (the model sees each pair twice at most: it underfits). Tested on TVsub (3 refs) and WMT22 (2 refs).
// Compare with tvsub_big_small_cpu (the same but the encoder) and tvsub_transformer_small (the
// earlier recipe: 2.1 BLEU on TVsub in about the same time).
local mt = import '../lib/mt.libsonnet';
local sets = mt.test_sets('transformer');

mt.tvsub_spec('transformer', 'small', epochs=mt.cpu40.epochs, recipe={ dropout: 0.0 }, max_pairs=mt.cpu40.pairs) + {
  test_sets: { tvsub: sets.tvsub, wmt22: sets.wmt22 },
}
