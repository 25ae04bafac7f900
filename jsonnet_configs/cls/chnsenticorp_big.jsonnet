// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: BiG-Transformer over character embeddings and lexicon words (mean pooling for classification).
// MLflow experiment: cls/chnsenticorp. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('chnsenticorp', 'big', epochs=10, lr=5e-4, batch_size=32)
