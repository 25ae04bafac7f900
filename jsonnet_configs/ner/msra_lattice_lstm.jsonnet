// MSRA NER (SIGHAN 2006; dev = a deterministic 10% of train). Lattice LSTM (Zhang & Yang 2018) over the jieba-lexicon lattice, batched mode; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'lattice_lstm')
