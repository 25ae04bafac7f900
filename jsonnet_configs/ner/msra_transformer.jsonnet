// MSRA NER (SIGHAN 2006; dev = a deterministic 10% of train). Transformer baseline over characters only (2 layers of 128, 4 heads, sinusoidal positions), CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'transformer')
