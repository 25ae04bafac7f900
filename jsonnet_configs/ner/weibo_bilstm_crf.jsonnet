// BiLSTM-CRF on Weibo NER (all 8 types: PER/ORG/LOC/GPE x NAM/NOM).
local ner = import '../lib/ner.libsonnet';

ner.spec('weibo', ner.bilstm_crf, trainer=ner.trainer(epochs=20, lr=2e-3), batch_size=16)
