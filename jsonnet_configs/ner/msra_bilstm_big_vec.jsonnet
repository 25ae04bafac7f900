// MSRA NER (BMES, 3 types): msra_bilstm_big.jsonnet with embeddings initialised from pretrained char, bigram (and, for
// lattice models, word) vectors in the directory given by --ext-var vectors=DIR
// (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.vec_spec('msra', 'bilstm_big', std.extVar('vectors'))
