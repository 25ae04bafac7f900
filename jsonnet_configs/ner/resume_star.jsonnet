// Resume NER (BMES, 8 types). Star-Transformer baseline: satellites see i-1, i, i+1, their embedding and the relay; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'star')
