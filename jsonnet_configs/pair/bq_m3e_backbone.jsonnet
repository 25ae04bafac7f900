// BQ corpus question matching, accuracy; pairs cut to 128 positions.
// Model: m3e-small cross-encoder over [CLS] a [SEP] b [SEP], the backbone alone, classifier on [CLS].
// m3e-small is 4 layers of 512 (the papers' BERT: 12 of 768). Needs pip install 'multigrain[m3e]'.
// Backbone at 1e-4, new layers at 1e-3, linear warm-up (../lib/sentence.libsonnet, m3e_pair_spec).
// MLflow experiment: pair/bq.
local sentence = import '../lib/sentence.libsonnet';

sentence.m3e_pair_spec('backbone')
