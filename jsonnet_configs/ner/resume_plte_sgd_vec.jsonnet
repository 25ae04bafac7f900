// Resume NER (BMES, 8 types): resume_plte_sgd.jsonnet (PLTE with the paper's SGD recipe) with embeddings initialised
// from the pretrained char, bigram and word vectors in --ext-var vectors=DIR, as the paper
// started SGD from word2vec vectors (benchmarks/pretrain_vectors.py writes runs/vectors). MLflow: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.vec_spec('resume', 'plte_sgd', std.extVar('vectors'))
