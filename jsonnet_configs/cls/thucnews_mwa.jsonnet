// THUCNews headlines (10 classes), accuracy; train/dev cut out of dev.txt.
// Model: backbone + MWA (word-aligned attention over jieba, snownlp and lac segmentations, gated fusion).
// MLflow experiment: cls/thucnews. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('thucnews', 'mwa', epochs=10, lr=5e-4, batch_size=64)
