// BiLSTM-CRF on Resume NER: the quickstart (`make run`). Char + bigram embeddings,
// one BiLSTM layer, a CRF constrained by the BMES scheme.
local ner = import '../lib/ner.libsonnet';

ner.spec('resume', ner.bilstm_crf, trainer=ner.trainer(epochs=8, lr=2e-3))
