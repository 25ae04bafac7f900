// PLTE on msra trained as the paper states: SGD lr 0.045, lr / (1 + 0.05 epoch), batch 16.
// The default msra_plte.jsonnet uses Adam (reasons in ../lib/ner_models.libsonnet). MLflow: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'plte_sgd')
