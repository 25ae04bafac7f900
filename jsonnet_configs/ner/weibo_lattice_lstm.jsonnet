// Weibo NER (all 8 types: PER/ORG/LOC/GPE x NAM/NOM). Lattice LSTM (Zhang & Yang 2018) over the jieba-lexicon lattice, batched mode; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'lattice_lstm')
