// The Lattice-BERT table of benchmarks/RESULTS.md: pre-training of Lattice-BERT, its MLM ablation and
// the character BERT baseline at the tiny size on the first 800,000 characters of the corpus ([800k]),
// then fine-tuning of each pre-trained model on four tasks, 3 seeds, on the CPU budget of that table
// ([1k]: every split cut to its first 1,000 instances, THUCNews test = the 10% hash bucket, AdamW
// 5e-4). A fine-tuning entry reads its pre-training run directory (ext-var pretrained: run_of), so
// it starts when that run has finished, and `--only 'resume_ner*'` plans the pre-training too.
//   multigrain suite jsonnet_configs/suites/lattice_bert.jsonnet [--only PATTERN] [--dry-run]
local pretraining = ['dataset_reader.max_chars=800000', 'trainer.num_epochs=1'];
local cut = ['trainer.optimizer.lr=5e-4', '+dataset_reader.max_instances=1000'];
local cuts = {
  resume_ner: cut, chnsenticorp: cut, bq: cut,
  thucnews: cut + ['+validation_dataset_reader.max_instances=1000', '+test_dataset_reader.split=test',
                   '+test_dataset_reader.test_fraction=0.1'],
};
local finetune(task, encoder, pretrained) = {
  spec: '../finetune/%s.jsonnet' % task, name: '%s_%s' % [task, encoder], seeds: [13, 14, 15],
  ext_vars: { pretrained: { run_of: pretrained }, encoder: encoder },
  configs: { '1k': cuts[task] }, resources: { cpus: 1, memory_gb: 4 },
};
{
  description: 'Lattice-BERT and char BERT: pre-training (tiny, 800k characters) and fine-tuning on four tasks',
  entries: [
    { spec: '../pretrain/lattice_bert_tiny.jsonnet', seeds: [13], configs: { '800k': pretraining },
      resources: { cpus: 1, memory_gb: 4 } },
    { spec: '../pretrain/lattice_bert_tiny_mlm.jsonnet', seeds: [13], configs: { '800k': pretraining },
      resources: { cpus: 1, memory_gb: 4 } },
    { spec: '../pretrain/char_bert_tiny.jsonnet', seeds: [13], configs: { '800k': pretraining },
      resources: { cpus: 1, memory_gb: 4 } },
  ] + [
    finetune(task, 'lattice_bert', 'lattice_bert_tiny [800k]')
    for task in ['resume_ner', 'thucnews', 'bq', 'chnsenticorp']
  ] + [
    finetune(task, 'char_bert', 'char_bert_tiny [800k]')
    for task in ['resume_ner', 'thucnews', 'bq', 'chnsenticorp']
  ],
}
