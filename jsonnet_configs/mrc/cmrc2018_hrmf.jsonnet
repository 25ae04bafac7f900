// CMRC 2018 span extraction, EM/F1 (CMRC way); 384-position windows, stride 128.
// Model: backbone + HRMF (voted jieba/snownlp/lac segmentation, word vectors, mixing, fused masked attention).
// MLflow experiment: mrc/cmrc2018. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('cmrc2018', 'hrmf', epochs=5, lr=3e-4, batch_size=16)
