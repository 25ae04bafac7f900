// The character BERT baseline of Lattice-BERT tiny: same corpus, sizes, optimiser and budget;
// characters only, whole segments of the lattice masked (the paper's BERT-our with whole word
// masking; see multigrain/components/encoders/char_bert.py). -o dataset_reader.max_chars=N as
// for lattice_bert_tiny.jsonnet: the two then process the same characters.
local lb = import '../lib/lattice_bert.libsonnet';

lb.pretrain('tiny', encoder='char_bert')
