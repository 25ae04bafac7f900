// MSRA NER (SIGHAN 2006; dev = a deterministic 10% of train). BiG-Transformer (Shu et al. 2020): bipartite char <-> lexicon word / sentence attention; CRF.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'big')
