// Weibo NER. Lattice LSTM[m3e]: the Lattice LSTM over m3e-small's character states and the jieba-lexicon words, softmax head (the PLTE paper's Lattice LSTM[BERT], §5.2).
// m3e-small is 4 layers of 512 (the papers' BERT: 12 of 768). Needs pip install 'multigrain[m3e]'.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'lattice_lstm_m3e')
