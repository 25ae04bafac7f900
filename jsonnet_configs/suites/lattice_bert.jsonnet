// The pre-training rows of the Lattice-BERT table: Lattice-BERT and the character BERT baseline
// at the tiny size. The fine-tuning rows read a pre-training run directory
// (jsonnet_configs/finetune/*.jsonnet, --ext-var pretrained=RUN_DIR), so they are trained after
// this suite with `multigrain train`; benchmarks/lattice_bert.py chains both.
{
  description: 'Lattice-BERT and char BERT pre-training (tiny)',
  entries: [
    { spec: '../pretrain/lattice_bert_tiny.jsonnet', seeds: [13], resources: { cpus: 1, memory_gb: 4 } },
    { spec: '../pretrain/char_bert_tiny.jsonnet', seeds: [13], resources: { cpus: 1, memory_gb: 4 } },
  ],
}
