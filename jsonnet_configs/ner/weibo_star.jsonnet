// Weibo NER (all 8 types: PER/ORG/LOC/GPE x NAM/NOM). Star-Transformer baseline: satellites see i-1, i, i+1, their embedding and the relay; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'star')
