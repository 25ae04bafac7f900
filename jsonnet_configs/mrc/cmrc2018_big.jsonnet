// CMRC 2018 span extraction, EM/F1 (CMRC way); 384-position windows, stride 128.
// Model: BiG-Transformer over character embeddings and lexicon words (mean pooling for classification).
// MLflow experiment: mrc/cmrc2018. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('cmrc2018', 'big', epochs=5, lr=3e-4, batch_size=16)
