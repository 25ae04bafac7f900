// TVsub zh->en, Transformer encoder over Chinese characters + the nmt_decoder (the baseline of
// tvsub_big: same decoder, sizes, data and budget). Trained on TVsub train, validated on TVsub dev
// (BLEU), tested on tvsub (3 refs), wmt22 (2 refs), wmt18/19/20 and tatoeba: one leaderboard
// experiment each (mt/<name>). Size `base` (Transformer base) for a GPU; tvsub_transformer_small
// for a CPU. Defaults in ../lib/mt.libsonnet.
local mt = import '../lib/mt.libsonnet';

mt.tvsub_spec('transformer', 'base')
