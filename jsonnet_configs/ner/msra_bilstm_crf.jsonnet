// MSRA NER (SIGHAN 2006; dev = a deterministic 10% of train). BiLSTM-CRF baseline: char + bigram embeddings, one BiLSTM layer (200 per direction), constrained CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'bilstm_crf')
