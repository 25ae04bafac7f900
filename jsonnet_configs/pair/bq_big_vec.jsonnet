// BQ Corpus sentence pairs (2 classes), accuracy.
// Model: bq_big.jsonnet with character embeddings from the SGNS vectors in --ext-var vectors=DIR
// (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow experiment: pair/bq. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.big_vec_spec('bq', std.extVar('vectors'))
