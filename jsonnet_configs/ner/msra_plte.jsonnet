// MSRA NER (SIGHAN 2006; dev = a deterministic 10% of train). PLTE (Xue et al. 2020): porous lattice transformer over the jieba-lexicon lattice, BiGRU-CRF decoder.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'plte')
