// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: m3e-small + BiG-Transformer (2 bipartite layers over the backbone's character states and the
// lexicon words, mean pooling): the paper's "BiG-Transformer (BERT)" setting, with the m3e rows' fine-tuning.
// Needs the optional extra: pip install 'multigrain[m3e]'. MLflow experiment: cls/chnsenticorp.
local sentence = import '../lib/sentence.libsonnet';

sentence.m3e_spec('chnsenticorp', 'big', epochs=2, lr=1e-4, batch_size=32)
