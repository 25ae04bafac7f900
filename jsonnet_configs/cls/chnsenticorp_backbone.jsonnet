// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: the char_transformer backbone alone ([CLS] pooling / start-end head).
// MLflow experiment: cls/chnsenticorp. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('chnsenticorp', 'backbone', epochs=10, lr=5e-4, batch_size=32)
