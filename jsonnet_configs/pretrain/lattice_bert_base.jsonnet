// Lattice-BERT base pre-training (MSP + SOP) on the default corpus (../lib/lattice_bert.libsonnet).
// A character budget: -o dataset_reader.max_chars=N (characters read per epoch; default all).
local lb = import '../lib/lattice_bert.libsonnet';

lb.pretrain('base')
