// A quick check of the translation pipeline (minutes on a CPU): a tiny Transformer-encoder
// translator on 2,000 Tatoeba training pairs, validated on 200 dev pairs, tested on the Tatoeba test
// split (mt/tatoeba) and TVsub test (mt/tvsub, 3 refs). Not a result: see tvsub_*.jsonnet.
local mt = import '../lib/mt.libsonnet';
local s = mt.sizes.tiny;
local cmn = mt.data_root + '/tatoeba_cmn_eng/cmn.txt';

{
  task: 'mt',
  dataset: 'tatoeba',
  dataset_reader: { type: 'tatoeba_cmn_eng', split: 'train', max_instances: 2000 },
  validation_dataset_reader: { type: 'tatoeba_cmn_eng', split: 'dev', max_instances: 200 },
  train_data_path: cmn,
  validation_data_path: cmn,
  test_sets: { tatoeba: mt.test_sets('transformer').tatoeba, tvsub: mt.test_sets('transformer').tvsub },
  data_loader: { batch_size: s.batch_size },
  model: mt.model('transformer', s) + { beam_size: 2 },
  trainer: mt.trainer(s),
  seed: 13,
}
