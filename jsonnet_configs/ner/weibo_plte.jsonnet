// Weibo NER (all 8 types: PER/ORG/LOC/GPE x NAM/NOM). PLTE (Xue et al. 2020): porous lattice transformer over the jieba-lexicon lattice, BiGRU-CRF decoder.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'plte')
