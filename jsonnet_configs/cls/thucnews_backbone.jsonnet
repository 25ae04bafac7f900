// THUCNews headlines (10 classes), accuracy; train/dev cut out of dev.txt.
// Model: the char_transformer backbone alone ([CLS] pooling / start-end head).
// MLflow experiment: cls/thucnews. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('thucnews', 'backbone', epochs=10, lr=5e-4, batch_size=64)
