#!/usr/bin/env bash
# MSRA NER over the m3e-small backbone (issue 41) on one GPU, within one device call: the entries
# `msra_{tagger,plte,big}_m3e [gpu-e1]` of jsonnet_configs/suites/ner.jsonnet (m3e-Tagger, PLTE[m3e],
# BiG[m3e]; one epoch of the whole MSRA training split, bf16): the runs `multigrain suite` plans for
# them, as processes side by side on the one GPU (benchmarks/suite_processes.py: that machine has no
# Ray; their CPU-side batching, lattices and CRF overlap). Runs still going at NER_S - 50 seconds
# (default NER_S=540) are stopped: an unfinished run keeps its last.pt (a later call resumes it) and
# gives no row. Writes under $OUT: ner_msra.log, ner_logs/ (each run's output),
# ner_runs/<run>/ (metrics.json, config.json: `multigrain log` them here) and
# ner_msra.json (one row per finished run: test/dev F1, epochs, minutes, device, spec hash).
# m3e-small is 4 layers of 512; the papers' BERT rows are 12 layers of 768.
#   PYTHON (python3), DEVICE (cuda | cpu), NER_SEEDS ("13"), NER_ONLY ('msra_*_m3e [gpu-e1]'),
#   NER_MAX (read only the first N sentences of every split: a rehearsal).
# Rehearsal here (the trainings on the CPU):
#   DEVICE=cpu NER_MAX=40 PYTHON=.venv/bin/python OUT=/tmp/ner-out bash benchmarks/device_ner.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
LIMIT=${NER_S:-540}
RUNS=$OUT/ner_runs
mkdir -p "$RUNS"
export CI=true PYTHONUNBUFFERED=1
extra=()
if [ -n "${NER_MAX:-}" ]; then
    for key in dataset_reader validation_dataset_reader test_dataset_reader; do
        extra+=(-o "+$key.max_instances=$NER_MAX")
    done
fi
echo "device_ner: ${NER_ONLY:-msra_*_m3e [gpu-e1]} seeds ${NER_SEEDS:-13} on $DEVICE, limit $((LIMIT - 20)) s ($(date -u +%T))"
# shellcheck disable=SC2086
timeout -k 20 $((LIMIT - 20)) $PY benchmarks/suite_processes.py jsonnet_configs/suites/ner.jsonnet \
    --only "${NER_ONLY:-msra_*_m3e [gpu-e1]}" --seeds ${NER_SEEDS:-13} --runs-dir "$RUNS" --logs "$OUT/ner_logs" \
    --seconds $((LIMIT - 50)) "${extra[@]}" 2>&1 | tee "$OUT/ner_msra.log"
status=${PIPESTATUS[0]}
$PY - "$RUNS" "$OUT/ner_msra.json" "$DEVICE" <<'PYEOF'
import json, sys
from pathlib import Path
runs, out, device = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
rows = []
for metrics in sorted(runs.glob("*/metrics.json")):
    m = json.loads(metrics.read_text())
    if not m.get("finished"):
        continue
    spec = json.loads((metrics.parent / "config.json").read_text())
    rows.append({"model": metrics.parent.name.split("-")[0].removeprefix("msra_"), "dataset": "msra",
                 "seed": spec["seed"], "test_f1": round(100 * m["test"]["f1"], 2),
                 "dev_f1": round(100 * m["validation"]["f1"], 2), "epochs": m["epochs_completed"],
                 "minutes": round(m["training_seconds"] / 60, 1), "device": m.get("device", device),
                 "spec_hash": m["spec_hash"][:12], "run_dir": metrics.parent.name,
                 "note": "m3e-small (4 layers x 512); the papers' BERT is 12 x 768"})
out.write_text(json.dumps(rows, indent=1) + "\n")
print(json.dumps(rows, indent=1))
PYEOF
echo "device_ner: done ($(date -u +%T)), status $status"
exit $status
