// Ablation -MSP of Lattice-BERT tiny: plain masked language modelling over lattice tokens
// (tokens masked one by one, so a masked character can be read off an overlapping word).
local lb = import '../lib/lattice_bert.libsonnet';

lb.pretrain('tiny', masking='token')
