// MSRA NER (SIGHAN 2006; dev = a deterministic 10% of train). BiG layers over a BiLSTM (the paper ran them over BERT); CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'bilstm_big')
