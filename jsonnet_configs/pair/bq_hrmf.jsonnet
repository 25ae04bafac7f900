// BQ corpus question matching, accuracy; pairs cut to 128 positions.
// Model: backbone + HRMF (voted jieba/snownlp/lac segmentation, word vectors, mixing, fused masked attention).
// MLflow experiment: pair/bq. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('bq', 'hrmf', epochs=3, lr=5e-4, batch_size=64)
