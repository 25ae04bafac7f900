// THUCNews headlines (10 classes), accuracy; train/dev cut out of dev.txt.
// Model: BiG-Transformer over character embeddings and lexicon words (mean pooling for classification).
// MLflow experiment: cls/thucnews. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('thucnews', 'big', epochs=10, lr=5e-4, batch_size=64)
