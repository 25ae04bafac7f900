// MSRA NER. m3e-Tagger, a second pass: the backbone of a finished run of msra_tagger_m3e.jsonnet
// (--ext-var msra_run=RUN_DIR; hf_transformer's archive_path) replaces m3e-small's weights, then the
// spec trains as msra_tagger_m3e.jsonnet does (a new CRF, a new warm-up and decay). In the ner suite
// it continues the 1-epoch `[cpu-e1]` run for one more epoch, the stage before resume_*_m3e_msra2.
// Needs pip install 'multigrain[m3e]'. MLflow experiment: ner/msra.
local models = import '../lib/ner_models.libsonnet';

models.spec('msra', 'tagger_m3e') + {
  model+: { embedder+: { archive_path: std.extVar('msra_run') } },
}
