// THUCNews titles (10 classes), accuracy.
// Model: thucnews_big.jsonnet with character embeddings from the SGNS vectors in --ext-var vectors=DIR
// (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow experiment: cls/thucnews. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.big_vec_spec('thucnews', std.extVar('vectors'))
