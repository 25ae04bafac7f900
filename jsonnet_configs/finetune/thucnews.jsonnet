// Fine-tuning a pre-trained Lattice-BERT on thucnews (../lib/lattice_bert.libsonnet, finetune).
// --ext-var pretrained=RUN: the pre-training run directory (its best.pt and vocabulary/);
// --ext-var encoder=lattice_bert, or char_bert for the character BERT baseline (a char_bert run).
local lb = import '../lib/lattice_bert.libsonnet';
local schedule = import 'schedule.libsonnet';

schedule.with_groups(lb.finetune('thucnews', std.extVar('pretrained'), encoder=std.extVar('encoder')))
