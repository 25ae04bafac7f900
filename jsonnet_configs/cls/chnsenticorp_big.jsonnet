// ChnSentiCorp sentiment (2 classes), accuracy; texts cut to 256 positions.
// Model: BiG-Transformer over character embeddings and lexicon words (mean pooling for classification).
// MLflow experiment: cls/chnsenticorp. Defaults in ../lib/sentence.libsonnet.
local sentence = import '../lib/sentence.libsonnet';

local p = sentence.big_paper;
sentence.spec('chnsenticorp', 'big', p.epochs, p.lr, p.batch_size, p.patience)
