// The `make run` quickstart: BiLSTM-CRF on Resume NER sized to train in a few minutes on
// 2 CPU cores (hidden 100, 6 epochs). `resume_bilstm_crf.jsonnet` is the full baseline.
local ner = import '../lib/ner.libsonnet';

ner.spec('resume', ner.bilstm_crf + { encoder+: { hidden_size: 100 } },
         trainer=ner.trainer(epochs=6, lr=3e-3))
