// Weibo NER (all 8 types: PER/ORG/LOC/GPE x NAM/NOM). Transformer baseline over characters only (2 layers of 128, 4 heads, sinusoidal positions), CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'transformer')
