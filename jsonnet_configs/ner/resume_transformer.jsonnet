// Resume NER (BMES, 8 types). Transformer baseline over characters only (2 layers of 128, 4 heads, sinusoidal positions), CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'transformer')
