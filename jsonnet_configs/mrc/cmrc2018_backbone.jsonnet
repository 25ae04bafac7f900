// CMRC 2018 span extraction, EM/F1 (CMRC way); 384-position windows, stride 128.
// Model: the char_transformer backbone alone ([CLS] pooling / start-end head).
// MLflow experiment: mrc/cmrc2018. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

sentence.spec('cmrc2018', 'backbone', epochs=5, lr=3e-4, batch_size=16)
