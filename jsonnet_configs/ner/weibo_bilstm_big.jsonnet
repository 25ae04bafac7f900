// Weibo NER (all 8 types: PER/ORG/LOC/GPE x NAM/NOM). BiG layers over a BiLSTM (the paper ran them over BERT); CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'bilstm_big')
