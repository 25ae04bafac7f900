// The NER table of benchmarks/RESULTS.md (Resume, Weibo, MSRA): every row's spec, seeds and
// configuration ([tag] overrides) as the committed board (benchmarks/results/leaderboard.json) has them.
//   multigrain suite jsonnet_configs/suites/ner.jsonnet [--only 'resume_*'] [--dry-run]
//   multigrain suite jsonnet_configs/suites/ner.jsonnet --check
// *_vec specs read the SGNS vectors of `python benchmarks/pretrain_vectors.py` (runs/vectors/);
// *_m3e_* specs need the optional extra multigrain[m3e].
local vectors = { vectors: 'runs/vectors' };
// MSRA over m3e-small: three trainings share one GPU (benchmarks/device_ner.sh; 46,364 training
// sentences are hours on this CPU), bf16 there ('auto'), one epoch in a device call.
local gpu_share = { cpus: 4, gpus: 0.33, memory_gb: 8 };
{
  description: 'the NER table of benchmarks/RESULTS.md (Resume, Weibo, MSRA)',
  entries: [
    { spec: '../ner/msra_big.jsonnet', seeds: [13] },
    { spec: '../ner/msra_bilstm_crf.jsonnet', seeds: [13] },
    { spec: '../ner/msra_lattice_lstm.jsonnet', seeds: [13] },
    { spec: '../ner/msra_plte_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/msra_star.jsonnet', seeds: [13] },
    { spec: '../ner/msra_tagger_m3e.jsonnet', seeds: [13, 14, 15], resources: gpu_share,
      configs: { 'gpu-e1': ['trainer.num_epochs=1', '+trainer.mixed_precision=auto'] } },
    { spec: '../ner/msra_plte_m3e.jsonnet', seeds: [13, 14, 15], resources: gpu_share,
      configs: { 'gpu-e1': ['trainer.num_epochs=1', '+trainer.mixed_precision=auto'] } },
    { spec: '../ner/msra_big_m3e.jsonnet', seeds: [13, 14, 15], resources: gpu_share,
      configs: { 'gpu-e1': ['trainer.num_epochs=1', '+trainer.mixed_precision=auto'] } },
    // The CPU rows issue 41 allows: each stopped after 1 of the MSRA specs' 2 epochs, 1 thread (an hour each).
    { spec: '../ner/msra_plte_m3e.jsonnet', seeds: [13, 14, 15], configs: { 'cpu-e1': ['trainer.num_epochs=1'] } },
    { spec: '../ner/msra_tagger_m3e.jsonnet', seeds: [13, 14, 15], configs: { 'cpu-e1': ['trainer.num_epochs=1'] } },
    { spec: '../ner/msra_big_m3e.jsonnet', seeds: [13, 14, 15], configs: { 'cpu-e1': ['trainer.num_epochs=1'] } },
    { spec: '../ner/msra_transformer.jsonnet', seeds: [13] },
    { spec: '../ner/resume_big.jsonnet', seeds: [13] },
    { spec: '../ner/resume_big_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/resume_bilstm_big.jsonnet', seeds: [13, 14, 15, 16, 17] },
    { spec: '../ner/resume_bilstm_big.jsonnet', seeds: [13],
      configs: { "adjacent": ["model.encoder.encoders.1.local=adjacent"] } },
    { spec: '../ner/resume_bilstm_big.jsonnet', seeds: [13],
      configs: { "no_global": ["model.encoder.encoders.1.global_node=false"] } },
    { spec: '../ner/resume_bilstm_big.jsonnet', seeds: [13],
      configs: { "no_local": ["model.encoder.encoders.1.local=none"] } },
    { spec: '../ner/resume_bilstm_big_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/resume_bilstm_crf.jsonnet', seeds: [13],
      overrides: ["trainer.num_epochs=30"] },
    { spec: '../ner/resume_bilstm_crf_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/resume_lattice_lstm.jsonnet', seeds: [13],
      overrides: ["trainer.num_epochs=5"] },
    { spec: '../ner/resume_plte.jsonnet', seeds: [13] },
    { spec: '../ner/resume_plte_sgd_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/resume_plte_vec.jsonnet', seeds: [13, 14, 15], ext_vars: vectors },
    { spec: '../ner/resume_plte_vec.jsonnet', seeds: [13], ext_vars: vectors,
      configs: { "no_lattice": ["model.encoder.lattice=false"] } },
    { spec: '../ner/resume_plte_vec.jsonnet', seeds: [13], ext_vars: vectors,
      configs: { "no_porous": ["model.encoder.porous=false"] } },
    // the PLTE trainer before 5009163 (its row's note): Adam 1e-3 at a constant rate, patience 5
    { spec: '../ner/resume_plte_vec.jsonnet', seeds: [13], ext_vars: vectors,
      configs: { constant_lr: ['trainer={"num_epochs":30,"optimizer":{"type":"adam","lr":1e-3},"grad_clipping":5,"patience":5,"validation_metric":"+f1"}'] } },
    { spec: '../ner/resume_star.jsonnet', seeds: [13] },
    { spec: '../ner/resume_tagger_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/resume_tagger_m3e.jsonnet', seeds: [13, 14, 15], configs: { e1: ["trainer.num_epochs=1"] } },
    // the BERT-Tagger as the PLTE paper runs it (softmax head), beside the CRF one above
    { spec: '../ner/resume_softmax_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/resume_plte_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/resume_plte_m3e.jsonnet', seeds: [13, 14, 15], configs: { e1: ["trainer.num_epochs=1"] } },
    // PLTE[m3e] read by the m3e-Tagger's CRF instead of the paper's softmax: the two taggers with one head
    { spec: '../ner/resume_plte_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19], configs: { crf: ['model.head={"type":"crf"}'] } },
    { spec: '../ner/resume_big_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/resume_big_m3e.jsonnet', seeds: [13, 14, 15], configs: { e1: ["trainer.num_epochs=1"] } },
    { spec: '../ner/resume_lattice_lstm_m3e.jsonnet', seeds: [13, 14, 15] },
    { spec: '../ner/resume_plte_m3e_wide.jsonnet', seeds: [13, 14, 15] },
    // Intermediate-task training: every seed starts from the backbone of one MSRA run, the m3e-Tagger's
    // seed 15 [cpu-e1] (its 1 of 2 epochs on the CPU: an hour on 1 thread, the only MSRA stage).
    { spec: '../ner/resume_tagger_m3e_msra.jsonnet', seeds: [13, 14, 15],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e [cpu-e1]', seed: 15 } } },
    { spec: '../ner/resume_plte_m3e_msra.jsonnet', seeds: [13, 14, 15],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e [cpu-e1]', seed: 15 } } },
    // The MSRA stage one epoch longer: the seed-15 [cpu-e1] run's backbone, one more epoch over MSRA (seed 16).
    { spec: '../ner/msra_tagger_m3e_again.jsonnet', seeds: [16], configs: { 'cpu-e1': ['trainer.num_epochs=1'] },
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e [cpu-e1]', seed: 15 } } },
    // seven seeds where three left the order of two rows to chance (RESULTS.md: Resume over MSRA, Weibo)
    { spec: '../ner/resume_tagger_m3e_msra2.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e_again [cpu-e1]', seed: 16 } } },
    { spec: '../ner/resume_plte_m3e_msra2.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e_again [cpu-e1]', seed: 16 } } },
    { spec: '../ner/resume_big_m3e_msra2.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e_again [cpu-e1]', seed: 16 } } },
    { spec: '../ner/resume_lattice_lstm_m3e_msra2.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e_again [cpu-e1]', seed: 16 } } },
    { spec: '../ner/weibo_tagger_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/weibo_softmax_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/weibo_plte_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/weibo_big_m3e.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    // PLTE[m3e] at the backbone's width (512, no projection to PLTE's 128)
    { spec: '../ner/weibo_plte_m3e_wide.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19] },
    { spec: '../ner/weibo_lattice_lstm_m3e.jsonnet', seeds: [13, 14, 15] },
    { spec: '../ner/weibo_tagger_m3e_msra2.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e_again [cpu-e1]', seed: 16 } } },
    { spec: '../ner/weibo_plte_m3e_msra2.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e_again [cpu-e1]', seed: 16 } } },
    { spec: '../ner/weibo_big_m3e_msra2.jsonnet', seeds: [13, 14, 15, 16, 17, 18, 19],
      ext_vars: { msra_run: { run_of: 'msra_tagger_m3e_again [cpu-e1]', seed: 16 } } },
    { spec: '../ner/resume_transformer.jsonnet', seeds: [13] },
    { spec: '../ner/weibo_big.jsonnet', seeds: [13] },
    { spec: '../ner/weibo_big_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/weibo_bilstm_big.jsonnet', seeds: [13] },
    { spec: '../ner/weibo_bilstm_big_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/weibo_bilstm_crf.jsonnet', seeds: [13] },
    { spec: '../ner/weibo_bilstm_crf_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/weibo_lattice_lstm.jsonnet', seeds: [13] },
    { spec: '../ner/weibo_plte.jsonnet', seeds: [13] },
    { spec: '../ner/weibo_plte_sgd_vec.jsonnet', seeds: [13], ext_vars: vectors },
    { spec: '../ner/weibo_plte_vec.jsonnet', seeds: [13, 14, 15, 16, 17], ext_vars: vectors },
    { spec: '../ner/weibo_star.jsonnet', seeds: [13] },
    { spec: '../ner/weibo_transformer.jsonnet', seeds: [13] },
  ],
}
