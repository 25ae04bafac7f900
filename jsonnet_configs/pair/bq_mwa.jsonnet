// BQ corpus question matching, accuracy; pairs cut to 128 positions.
// Model: backbone + MWA (word-aligned attention over jieba, snownlp and lac segmentations, gated fusion).
// MLflow experiment: pair/bq. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('bq', 'mwa', epochs=3, lr=5e-4, batch_size=64)
