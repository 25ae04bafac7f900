// CMRC 2018 span extraction, EM/F1.
// Model: cmrc2018_big.jsonnet with character embeddings from the SGNS vectors in --ext-var vectors=DIR
// (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow experiment: mrc/cmrc2018. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.big_vec_spec('cmrc2018', std.extVar('vectors'))
