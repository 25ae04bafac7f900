// Resume NER. m3e-Tagger: the m3e-small backbone + CRF (the papers' BERT-Tagger).
// m3e-small is 4 layers of 512 (the papers' BERT: 12 of 768). Needs pip install 'multigrain[m3e]'.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'tagger_m3e')
