// The fine-tuning schedule of every spec in this folder (BERT fine-tuning's): the pre-trained
// embedder and encoder at `backbone_lr`, the new head at `head_lr`, both warmed up linearly over
// the first 10% of the steps and decayed linearly to 0 (the scheduler of lattice_bert.finetune).
// With one rate of 1e-4 for everything (and 2 epochs) Lattice-BERT learned nothing on Resume:
// a head trained from scratch needs the higher rate. Override with
// -o trainer.optimizer.lr=HEAD -o 'trainer.optimizer.parameter_groups=[[["^(embedder|encoder)\\."], {"lr": BACKBONE}]]'.
{
  with_groups(spec, backbone_lr=1e-4, head_lr=1e-3):: spec + {
    trainer+: { optimizer+: { lr: head_lr, parameter_groups: [[['^(embedder|encoder)\\.'], { lr: backbone_lr }]] } },
  },
}
