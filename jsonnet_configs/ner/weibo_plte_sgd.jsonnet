// PLTE on weibo trained as the paper states: SGD lr 0.045, lr / (1 + 0.05 epoch), batch 16.
// The default weibo_plte.jsonnet uses Adam (reasons in ../lib/ner_models.libsonnet). MLflow: ner/weibo.
local models = import '../lib/ner_models.libsonnet';

models.spec('weibo', 'plte_sgd')
