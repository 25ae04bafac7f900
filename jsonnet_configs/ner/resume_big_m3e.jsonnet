// Resume NER. BiG[m3e]: BiG-Transformer layers over m3e-small's character states and the lexicon words; CRF.
// m3e-small is 4 layers of 512 (the papers' BERT: 12 of 768). Needs pip install 'multigrain[m3e]'.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'big_m3e')
