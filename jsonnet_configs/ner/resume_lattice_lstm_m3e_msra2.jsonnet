// Resume NER. Lattice LSTM[m3e] over m3e-small fine-tuned on MSRA for two passes (intermediate-task training, as
// resume_{tagger,plte,big}_m3e_msra2.jsonnet): --ext-var msra_run=RUN_DIR names a finished run of
// msra_tagger_m3e_again.jsonnet, whose backbone replaces m3e-small's weights (hf_transformer's archive_path);
// then the spec trains as resume_lattice_lstm_m3e.jsonnet does. Needs pip install 'multigrain[m3e]'.
// Settings and their sources: ../lib/ner_models.libsonnet. MLflow experiment: ner/resume.
local models = import '../lib/ner_models.libsonnet';

models.spec('resume', 'lattice_lstm_m3e') + {
  model+: { embedder+: { backbone+: { archive_path: std.extVar('msra_run') } } },
}
