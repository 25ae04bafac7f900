// Resume NER (BMES, 8 types). BiG layers over a BiLSTM (the paper ran them over BERT); CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'bilstm_big')
