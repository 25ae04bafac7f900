#!/usr/bin/env bash
# MSRA NER over the m3e-small backbone (issue 41) on one GPU, within one device call:
# m3e-Tagger (backbone + CRF), PLTE[m3e] and BiG[m3e] (jsonnet_configs/ner/msra_{tagger,plte,big}_m3e.jsonnet),
# trained side by side on the one GPU (their CPU-side batching, lattices and CRF overlap), each
# NER_EPOCHS epochs (default 1) of the whole MSRA training split, bf16 autocast, seed NER_SEED (13).
# Every training is stopped at NER_S - 20 seconds (default NER_S=540): an unfinished one leaves its
# last.pt and no row. Writes under $OUT: ner_msra_<model>.log, ner_runs/<run>/ (metrics.json,
# config.json) and ner_msra.json (one row per finished run: test/dev F1, epochs, minutes, device,
# spec hash). m3e-small is 4 layers of 512; the papers' BERT rows are 12 layers of 768.
#   PYTHON (python3), DEVICE (cuda | cpu), NER_MODELS ("tagger_m3e plte_m3e big_m3e"), NER_MAX
#   (read only the first N sentences of every split: a rehearsal), NER_THREADS (CPU threads per training, 4).
# Rehearsal here:
#   DEVICE=cpu NER_MAX=40 NER_THREADS=1 PYTHON=.venv/bin/python OUT=/tmp/ner-out bash benchmarks/device_ner.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
EPOCHS=${NER_EPOCHS:-1}
SEED=${NER_SEED:-13}
LIMIT=${NER_S:-540}
MODELS=${NER_MODELS:-"tagger_m3e plte_m3e big_m3e"}
RUNS=$OUT/ner_runs
mkdir -p "$RUNS"
export CI=true PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${NER_THREADS:-4}
extra=(-o "trainer.num_epochs=$EPOCHS" -o "seed=$SEED")
if [ "$DEVICE" = cpu ]; then
    extra+=(-o +trainer.cuda_device=-1)
else
    extra+=(-o +trainer.mixed_precision=bf16)
fi
if [ -n "${NER_MAX:-}" ]; then
    for key in dataset_reader validation_dataset_reader test_dataset_reader; do
        extra+=(-o "+$key.max_instances=$NER_MAX")
    done
fi
echo "device_ner: $MODELS on $DEVICE, $EPOCHS epoch(s), seed $SEED, limit $((LIMIT - 20)) s ($(date -u +%T))"
pids=()
for model in $MODELS; do
    timeout -k 10 $((LIMIT - 20)) $PY -m multigrain.platform.cli train "jsonnet_configs/ner/msra_$model.jsonnet" \
        -s "$RUNS/msra_${model}_s$SEED" --no-tracking "${extra[@]}" > "$OUT/ner_msra_$model.log" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
for model in $MODELS; do echo "--- $model"; grep -E "^epoch [0-9]+/[0-9]+ \|" "$OUT/ner_msra_$model.log" | tail -3; done
$PY - "$RUNS" "$OUT/ner_msra.json" "$DEVICE" <<'PYEOF'
import json, sys
from pathlib import Path
runs, out, device = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
rows = []
for metrics in sorted(runs.glob("*/metrics.json")):
    m = json.loads(metrics.read_text())
    if not m.get("finished"):
        continue
    name, seed = metrics.parent.name.rsplit("_s", 1)
    rows.append({"model": name.removeprefix("msra_"), "dataset": "msra", "seed": int(seed),
                 "test_f1": round(100 * m["test"]["f1"], 2), "dev_f1": round(100 * m["validation"]["f1"], 2),
                 "epochs": m["epochs_completed"], "minutes": round(m["training_seconds"] / 60, 1),
                 "device": device, "spec_hash": m["spec_hash"][:12],
                 "note": "m3e-small (4 layers x 512); the papers' BERT is 12 x 768"})
out.write_text(json.dumps(rows, indent=1) + "\n")
print(json.dumps(rows, indent=1))
PYEOF
echo "device_ner: done ($(date -u +%T)), status $status"
exit $status
