// Every table of benchmarks/RESULTS.md: `multigrain suite jsonnet_configs/suites/all.jsonnet
// --address HEAD:6379` on a cluster (hours on one CPU), `--check` to compare with the committed board.
local parts = [import 'ner.jsonnet', import 'sentence.jsonnet', import 'mt.jsonnet', import 'lattice_bert.jsonnet'];
{
  description: 'every results table',
  entries: std.flattenArrays([p.entries for p in parts]),
}
