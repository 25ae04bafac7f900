// TVsub zh->en, BiG-Transformer encoder (big_transformer.txt: characters attend to the lexicon
// words containing them and a sentence node) over the lattice of characters + jieba lexicon words,
// + the same nmt_decoder, sizes, data and budget as tvsub_transformer; the same test sets.
// Size `base` (Transformer base) for a GPU; tvsub_big_small for a CPU. Defaults in ../lib/mt.libsonnet.
local mt = import '../lib/mt.libsonnet';

mt.tvsub_spec('big', 'base')
