// THUCNews headlines (10 classes), accuracy; train/dev cut out of dev.txt.
// Model: backbone + HRMF (voted jieba/snownlp/lac segmentation, word vectors, mixing, fused masked attention).
// MLflow experiment: cls/thucnews. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('thucnews', 'hrmf', epochs=10, lr=5e-4, batch_size=64)
