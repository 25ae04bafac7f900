// MSRA NER (SIGHAN 2006; dev = a deterministic 10% of train). Star-Transformer baseline: satellites see i-1, i, i+1, their embedding and the relay; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'star')
