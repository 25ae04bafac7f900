// Resume NER (BMES, 8 types). PLTE (Xue et al. 2020): porous lattice transformer over the jieba-lexicon lattice, BiGRU-CRF decoder.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'plte')
