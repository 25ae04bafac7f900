// tvsub_transformer at the `small` size (3+3 layers of 256) for a CPU budget; the baseline of
// tvsub_big_small. Defaults in ../lib/mt.libsonnet.
local mt = import '../lib/mt.libsonnet';

mt.tvsub_spec('transformer', 'small')
