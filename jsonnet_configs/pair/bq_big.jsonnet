// BQ corpus question matching, accuracy; pairs cut to 128 positions.
// Model: BiG-Transformer over character embeddings and lexicon words (mean pooling for classification).
// MLflow experiment: pair/bq. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('bq', 'big', epochs=3, lr=5e-4, batch_size=64)
