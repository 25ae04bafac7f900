// Resume NER. m3e-Tagger over m3e-small fine-tuned on MSRA for two passes: resume_tagger_m3e_msra.jsonnet,
// whose --ext-var msra_run=RUN_DIR names a finished run of msra_tagger_m3e_again.jsonnet (the first
// pass's backbone trained for one more epoch over MSRA) instead of one of msra_tagger_m3e.jsonnet.
// A spec of its own so that its rows are its own on the board. Needs pip install 'multigrain[m3e]'.
// MLflow experiment: ner/resume.
import 'resume_tagger_m3e_msra.jsonnet'
