// Issue 40's device call (benchmarks/device_session.sh mt): the `small` translator with
// the BiG-Transformer encoder (lattice of characters + jieba words). Recipe `fast` (../lib/mt.libsonnet): pre-norm,
// inverse-square-root schedule after 300 warm-up steps, peak 1.5e-3, no dropout; one epoch of every
// TVsub pair in token batches of at most 8,192 source + target tokens (mt.gpu); bf16 on a GPU
// ('auto': float32 on a CPU). Tested on TVsub (3 refs), WMT22 (2 refs) and Tatoeba.
// tvsub_transformer_small_gpu and tvsub_big_small_gpu differ only in the encoder.
local mt = import '../lib/mt.libsonnet';
local sets = mt.test_sets('big');

mt.tvsub_spec('big', 'small', epochs=mt.gpu.epochs, recipe=mt.gpu.recipe,
              batch={ batch_size: mt.gpu.batch_size, max_tokens: mt.gpu.max_tokens,
                     eval_batch_size: mt.gpu.eval_batch_size }) + {
  trainer+: { mixed_precision: 'auto' },
  test_sets: { tvsub: sets.tvsub, wmt22: sets.wmt22, tatoeba: sets.tatoeba },
}
