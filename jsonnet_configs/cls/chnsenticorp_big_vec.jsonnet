// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: chnsenticorp_big.jsonnet with character embeddings from the SGNS vectors in --ext-var vectors=DIR
// (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow experiment: cls/chnsenticorp. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

local p = sentence.big_paper;
sentence.big_vec_spec('chnsenticorp', std.extVar('vectors'), p.epochs, p.lr, p.batch_size, p.patience)
