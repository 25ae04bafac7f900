// Issue 40's CPU recipe: the `small` Transformer-encoder translator (3+3 layers of 256) trained for
// about 40 minutes of one core of this 2-core machine (mt.cpu40): 2 epochs over the first 180,000
// TVsub pairs in length-bucketed token batches of at most 1,536 tokens. Recipe `fast`
// (../lib/mt.libsonnet): pre-norm encoder and decoder, Adam at 1.5e-3 with an inverse-square-root
// schedule after 400 warm-up steps, no dropout (the model sees each pair twice at most: it
// underfits). Tested on TVsub (3 refs) and WMT22 (2 refs). Compare with tvsub_big_small_cpu (the
// same but the encoder) and tvsub_transformer_small (the earlier recipe: 2.1 BLEU on TVsub in about
// the same time).
local mt = import '../lib/mt.libsonnet';
local sets = mt.test_sets('transformer');

mt.tvsub_spec('transformer', 'small', epochs=mt.cpu40.epochs, recipe=mt.cpu40.recipe, max_pairs=mt.cpu40.pairs,
              batch=mt.cpu40.batch) + {
  test_sets: { tvsub: sets.tvsub, wmt22: sets.wmt22 },
}
