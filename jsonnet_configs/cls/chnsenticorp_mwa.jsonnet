// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: backbone + MWA (word-aligned attention over jieba, snownlp and lac segmentations, gated fusion).
// MLflow experiment: cls/chnsenticorp. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('chnsenticorp', 'mwa', epochs=10, lr=5e-4, batch_size=32)
