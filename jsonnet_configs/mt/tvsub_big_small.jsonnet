// tvsub_big at the `small` size (3+3 layers of 256) for a CPU budget; compare with
// tvsub_transformer_small. Defaults in ../lib/mt.libsonnet.
local mt = import '../lib/mt.libsonnet';

mt.tvsub_spec('big', 'small')
