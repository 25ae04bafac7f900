// The translation rows of benchmarks/RESULTS.md: the Transformer and BiG encoders on TVsub at the
// `small` size, three seeds each (scored on TVsub's 3 references and WMT22's 2 by their specs'
// test_sets). The GPU-sized runs are `benchmarks/device_session.sh mt`.
local gpu_share = { cpus: 2, gpus: 0.16, memory_gb: 8 };
local base_gpu = ['trainer.num_epochs=1', '+dataset_reader.max_instances=280000', '+trainer.mixed_precision=bf16'];
// RESULTS.md "Translation (zh→en)" (the CPU table, 3 seeds): what `mt_results.py --size small --epochs 1
// --max-train-pairs 160000 --test-sets tatoeba tvsub` made of the spec: 1 epoch over the first 160,000
// pairs, validation on the whole dev set (its own reader, uncut), tested on TVsub and Tatoeba only (the
// news sets were decoded after training, --score-sets: not part of those runs). The same hashes.
local cpu_160k(spec) = {
  'trainer.num_epochs': 1,
  '+dataset_reader.max_instances': 160000,
  '+validation_dataset_reader': spec.dataset_reader,
  test_sets: { tatoeba: spec.test_sets.tatoeba, tvsub: spec.test_sets.tvsub },
};
local scaled_150k = ['+model.encoder.scale_embeddings=true', 'dataset_reader.max_instances=150000'];
{
  description: 'translation: Transformer vs BiG on TVsub (small)',
  entries: [
    { spec: '../mt/tvsub_transformer_small.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 } },
    { spec: '../mt/tvsub_big_small.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 } },
    // issue 40's 40-minute CPU recipe (RESULTS.md: Translation on the CPU: 40 minutes)
    { spec: '../mt/tvsub_transformer_small_cpu.jsonnet', seeds: [13], resources: { cpus: 1, memory_gb: 4 } },
    { spec: '../mt/tvsub_big_small_cpu.jsonnet', seeds: [13], resources: { cpus: 1, memory_gb: 4 } },
    // the third: the same with the encoder's input scaled as Vaswani et al. scale embeddings (sqrt(d) x the
    // character vectors, whose norm was about 1/11 of the position vectors') over the first 150,000 pairs
    { spec: '../mt/tvsub_transformer_small_cpu.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 },
      configs: { 'scaled-150k': scaled_150k } },
    { spec: '../mt/tvsub_big_small_cpu.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 },
      configs: { 'scaled-150k': scaled_150k } },
    // the base size on a GPU, one epoch of the first 280,000 pairs (Translation on a GPU: base)
    { spec: '../mt/tvsub_transformer.jsonnet', seeds: [13], resources: { cpus: 4, gpus: 0.5, memory_gb: 16 },
      configs: { 'gpu-280k-e1': base_gpu } },
    { spec: '../mt/tvsub_big.jsonnet', seeds: [13], resources: { cpus: 4, gpus: 0.5, memory_gb: 16 },
      configs: { 'gpu-280k-e1': base_gpu } },
    // issue 40's GPU recipe: six trainings share one GPU (benchmarks/device_session.sh mt)
    { spec: '../mt/tvsub_transformer_small_gpu.jsonnet', seeds: [13, 14, 15], resources: gpu_share },
    { spec: '../mt/tvsub_big_small_gpu.jsonnet', seeds: [13, 14, 15], resources: gpu_share },
    // the same six runs extended by a second epoch (device_session.sh mt's second pass, --extend)
    { spec: '../mt/tvsub_transformer_small_gpu.jsonnet', seeds: [13, 14, 15], resources: gpu_share,
      configs: { e2: ['trainer.num_epochs=2'] } },
    { spec: '../mt/tvsub_big_small_gpu.jsonnet', seeds: [13, 14, 15], resources: gpu_share,
      configs: { e2: ['trainer.num_epochs=2'] } },
    { spec: '../mt/tvsub_transformer_small.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 },
      configs: { '160k-e1': cpu_160k(import '../mt/tvsub_transformer_small.jsonnet') } },
    { spec: '../mt/tvsub_big_small.jsonnet', seeds: [13, 14, 15], resources: { cpus: 1, memory_gb: 4 },
      configs: { '160k-e1': cpu_160k(import '../mt/tvsub_big_small.jsonnet') } },
  ],
}
