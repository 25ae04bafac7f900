// Resume NER (BMES, 8 types). Lattice LSTM (Zhang & Yang 2018) over the jieba-lexicon lattice, batched mode; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'lattice_lstm')
