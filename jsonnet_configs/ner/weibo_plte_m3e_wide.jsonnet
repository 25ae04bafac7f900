// Weibo NER. PLTE[m3e] at the backbone's width (512; the paper's PLTE is 128): PLTE over m3e-small's
// character states and the jieba-lexicon words, softmax head (the paper's §5.2).
// m3e-small is 4 layers of 512 (the papers' BERT: 12 of 768). Needs pip install 'multigrain[m3e]'.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'plte_m3e_wide')
