// Weibo NER (BIO, NAM + NOM): weibo_plte_sgd.jsonnet (PLTE with the paper's SGD recipe) with embeddings initialised
// from the pretrained char, bigram and word vectors in --ext-var vectors=DIR, as the paper
// started SGD from word2vec vectors (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.vec_spec('weibo', 'plte_sgd', std.extVar('vectors'))
