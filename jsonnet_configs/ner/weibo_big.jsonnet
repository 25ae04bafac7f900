// Weibo NER (all 8 types: PER/ORG/LOC/GPE x NAM/NOM). BiG-Transformer (Shu et al. 2020): bipartite char <-> lexicon word / sentence attention; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'big')
