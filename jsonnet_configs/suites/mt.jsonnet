// The translation rows of benchmarks/RESULTS.md: the Transformer and BiG encoders on TVsub at the
// `small` size, three seeds each (scored on TVsub's 3 references and WMT22's 2 by their specs'
// test_sets). The GPU-sized runs are `benchmarks/device_session.sh mt`.
local gpu_share = { cpus: 2, gpus: 0.16, memory_gb: 8 };
{
  description: 'translation: Transformer vs BiG on TVsub (small)',
  entries: [
    { spec: '../mt/tvsub_transformer_small.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 } },
    { spec: '../mt/tvsub_big_small.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 } },
    // issue 40's GPU recipe: six trainings share one GPU (benchmarks/device_session.sh mt)
    { spec: '../mt/tvsub_transformer_small_gpu.jsonnet', seeds: [13, 14, 15], resources: gpu_share },
    { spec: '../mt/tvsub_big_small_gpu.jsonnet', seeds: [13, 14, 15], resources: gpu_share },
  ],
}
