// tvsub_transformer_small_cpu with the BiG-Transformer encoder over the lattice of characters +
// jieba lexicon words: the same decoder, recipe, pairs, epochs and test sets (issue 40's 40-minute
// CPU budget). Defaults in ../lib/mt.libsonnet.
local mt = import '../lib/mt.libsonnet';
local sets = mt.test_sets('big');

mt.tvsub_spec('big', 'small', epochs=mt.cpu40.epochs, recipe=mt.cpu40.recipe, max_pairs=mt.cpu40.pairs,
              batch=mt.cpu40.batch) + {
  test_sets: { tvsub: sets.tvsub, wmt22: sets.wmt22 },
}
