// BQ corpus question matching, accuracy; pairs cut to 128 positions.
// Model: the char_transformer backbone alone ([CLS] pooling / start-end head).
// MLflow experiment: pair/bq. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('bq', 'backbone', epochs=3, lr=5e-4, batch_size=64)
