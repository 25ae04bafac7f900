// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: chnsenticorp_big_vec.jsonnet with static 512-d character vectors from m3e-small's input embedding
// table (--ext-var vectors=DIR holding m3e_chars.vec: benchmarks/export_m3e_vectors.py) instead of our SGNS
// ones: BiG's word2vec setting with vectors pretrained on a large corpus. MLflow experiment: cls/chnsenticorp.
local sentence = import '../lib/sentence.libsonnet';

local p = sentence.big_paper;
sentence.big_vec_spec('chnsenticorp', std.extVar('vectors'), p.epochs, p.lr, p.batch_size, p.patience,
                      file='m3e_chars.vec', char_dim=512)
