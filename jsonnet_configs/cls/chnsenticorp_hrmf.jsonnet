// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: backbone + HRMF (voted jieba/snownlp/lac segmentation, word vectors, mixing, fused masked attention).
// MLflow experiment: cls/chnsenticorp. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('chnsenticorp', 'hrmf', epochs=10, lr=5e-4, batch_size=32)
