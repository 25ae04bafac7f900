// Resume NER (BMES, 8 types). BiG-Transformer (Shu et al. 2020): bipartite char <-> lexicon word / sentence attention; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'big')
