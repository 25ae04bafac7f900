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
// The later Lattice-BERT sections of RESULTS.md (benchmarks/lattice_bert.py --chars-budget N
// [--batch-size 16]): each budget's pre-trainings ([2400k], [800k-b16], [4m-b16], [all-b16]) and the same
// fine-tunings as [1k] from them ([<budget>-1k]), each budget with its table's models and tasks
// (MSRA was fine-tuned only at 2.4M characters, the -MSP ablation pre-trained only at 4M).
local budgets = {
  '2400k': { pretraining: ['dataset_reader.max_chars=2400000', 'trainer.num_epochs=1'],
             models: ['lattice_bert', 'char_bert'],
             tasks: ['resume_ner', 'msra_ner', 'thucnews', 'bq', 'chnsenticorp'] },
  // batches of 16 pairs instead of the spec's 64: four times the updates over the same characters
  '800k-b16': { pretraining: ['dataset_reader.max_chars=800000', 'trainer.num_epochs=1', 'data_loader.batch_size=16'],
                models: ['lattice_bert', 'char_bert'],
                tasks: ['resume_ner', 'chnsenticorp', 'thucnews', 'bq'] },
  '4m-b16': { pretraining: ['dataset_reader.max_chars=4000000', 'trainer.num_epochs=1', 'data_loader.batch_size=16'],
              models: ['lattice_bert', 'lattice_bert_mlm', 'char_bert'],
              tasks: ['resume_ner', 'chnsenticorp', 'thucnews', 'bq'] },
  // one whole pass over the corpus (10,809,170 characters) in batches of 16: hours per model on one
  // CPU thread, resumed from last.pt (written inside the epoch) across sessions
  'all-b16': { pretraining: ['trainer.num_epochs=1', 'data_loader.batch_size=16'],
               models: ['lattice_bert', 'char_bert'],
               tasks: ['resume_ner', 'chnsenticorp', 'thucnews', 'bq'] },
};
local pretrained = { lattice_bert: 'lattice_bert_tiny', lattice_bert_mlm: 'lattice_bert_tiny_mlm',
                     char_bert: 'char_bert_tiny' };
// MSRA has dev and test readers of its own: cut them too, as lattice_bert.py cuts every split
local later_cuts = cuts + { msra_ner: cut + ['+validation_dataset_reader.max_instances=1000',
                                             '+test_dataset_reader.max_instances=1000'] };
// the -MSP model is a Lattice-BERT encoder (its ext-var encoder), named after its pre-training
local finetune_from(task, model, budget) = {
  spec: '../finetune/%s.jsonnet' % task, name: '%s_%s' % [task, model], seeds: [13, 14, 15],
  ext_vars: { pretrained: { run_of: '%s [%s]' % [pretrained[model], budget] },
              encoder: if model == 'char_bert' then 'char_bert' else 'lattice_bert' },
  configs: { [budget + '-1k']: later_cuts[task] }, resources: { cpus: 1, memory_gb: 4 },
};
{
  description: 'Lattice-BERT and char BERT: pre-training (tiny; 800k, 2.4M and 4M characters) and fine-tuning '
               + 'on four or five tasks',
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
  ] + [
    { spec: '../pretrain/%s.jsonnet' % pretrained[model], seeds: [13],
      configs: { [b]: budgets[b].pretraining
                 for b in std.objectFields(budgets) if std.member(budgets[b].models, model) },
      resources: { cpus: 1, memory_gb: 4 } }
    for model in ['lattice_bert', 'lattice_bert_mlm', 'char_bert']
  ] + [
    finetune_from(task, model, b)
    for b in std.objectFields(budgets)
    for model in budgets[b].models
    for task in budgets[b].tasks
  ],
}
