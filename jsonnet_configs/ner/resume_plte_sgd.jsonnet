// PLTE on resume trained as the paper states: SGD lr 0.045, lr / (1 + 0.05 epoch), batch 16.
// The default resume_plte.jsonnet uses Adam (reasons in ../lib/ner_models.libsonnet). MLflow: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'plte_sgd')
