// Weibo NER (BIO, NAM + NOM): weibo_bilstm_big.jsonnet with embeddings initialised from pretrained char, bigram (and, for
// lattice models, word) vectors in the directory given by --ext-var vectors=DIR
// (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.vec_spec('weibo', 'bilstm_big', std.extVar('vectors'))
