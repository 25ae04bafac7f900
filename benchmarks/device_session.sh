#!/usr/bin/env bash
# The GPU work of issues 26, 27 and 40, for one call of the `device` tool (a lent machine, about ten
# minutes of it): prepare here with `python benchmarks/device_kit.py --parts PARTS`, then run there
#   bash benchmarks/device_session.sh PARTS      (carry .device; see device_kit.py)
# PARTS, in order, each under its own time limit (seconds; environment overrides):
#   checks  benchmarks/cuda_checks.py: beam search and Lattice-BERT on CUDA = CPU, bf16 trainings,
#           the mt and lb budgets measured (its plan_mt, plan_lb lines)                         CHECKS_S=240
#           CHECKS="beam plan_mt ..." runs only those checks (default: all)
#   speed   benchmarks/mt_speed.py --device cuda (3 processes)                                      SPEED_S=150
#   mt      benchmarks/mt_results.py, both encoders x MT_SEEDS seeds (default 3, from 13) side by side
#           on the GPU, the specs tvsub_*_MT_SIZE_MT_VARIANT (default small_gpu: issue 40's recipe, pre-norm,
#           inverse-sqrt schedule, token batches, bf16, one epoch of all TVsub pairs), tests tvsub wmt22
#           tatoeba; MT_VARIANT=none: the older tvsub_*[_small] specs under --mixed-precision bf16,
#           MT_SIZE base by default there. MT_EPOCHS overrides the spec's epochs                   MT_S=480
#           MT_PAIRS=N trains on the first N pairs; MT_PAIRS=auto sizes N from this call's plan_mt line
#           (checks first, same MT_SIZE) so that every training ends inside MT_S (mt_pairs.py); with
#           SESSION_S set, MT_S defaults to what is left of SESSION_S seconds (from this script's start) - 20
#   lb      benchmarks/lattice_bert.py, LB_CHARS characters (default the whole corpus), one seed,
#           four fine-tuning tasks (lbert: the same part)                                           LB_S=540
#   ner     bash benchmarks/device_ner.sh (BiG over a pretrained backbone for NER)                  NER_S=540
# Everything it writes comes back in $OUT: session.log and results.tar.gz (RESULTS.md with the GPU
# speed section, the mt/lb tables and JSON results, the mt trainings' logs, every run directory's
# metrics.json/config.json for `multigrain log` here). PYTHON and DEVICE (default python3, cuda;
# cpu: fp32) and MT_EXTRA / LB_EXTRA (more arguments) let a CPU machine rehearse the plumbing, e.g.
#   REHEARSAL=1 PYTHON=.venv/bin/python DEVICE=cpu MT_SEEDS=1 \
#       MT_EXTRA="--max-train-pairs 300 --max-test-sentences 10 --max-dev-sentences 20" bash benchmarks/device_session.sh mt
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/session.log") 2>&1
export CI=true PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
# REHEARSAL=1 (here, on the CPU): the project's venv has the packages (the kit's wheels are cp312) and
# ../shared/data is the data itself, so neither is installed nor unpacked
if [ "${REHEARSAL:-0}" = 1 ]; then
    export PYTHONPATH=$PWD
else
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .device/wheels/*.whl || { echo "wheels did not install"; exit 3; }
    export PYTHONPATH=/tmp/site:$PWD
    # unpacked at every call: a warm machine may hold an older kit's archive
    mkdir -p ../shared && tar -xzf .device/data.tar.gz -C ../shared || { echo "data did not unpack"; exit 3; }
fi
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
RUNS=runs/device
precision=(--mixed-precision bf16)
[ "${DEVICE:-cuda}" = cpu ] && precision=()
status=0
for part in "$@"; do
    echo "=== $part ($(date -u +%T))"
    case $part in
        checks) timeout "${CHECKS_S:-240}" $PY benchmarks/cuda_checks.py --device "${DEVICE:-cuda}" --runs-dir "$RUNS/checks" \
            --mt-size "${MT_SIZE:-base}" ${CHECKS:+--checks $CHECKS} ;;
        speed) timeout "${SPEED_S:-150}" $PY benchmarks/mt_speed.py --device "${DEVICE:-cuda}" --processes 3 --repeats 7 ;;
        mt)
            [ -n "${SESSION_S:-}" ] && MT_S=${MT_S:-$((SESSION_S - SECONDS - 20))}
            variant=${MT_VARIANT:-gpu}
            recipe=(--variant "$variant")
            if [ "$variant" = none ]; then
                size=${MT_SIZE:-base}
                recipe=("${precision[@]}")  # the older specs: bf16 given here (the gpu ones say 'auto')
            else
                size=${MT_SIZE:-small}
            fi
            seeds=$(seq 13 $((12 + ${MT_SEEDS:-3})))
            echo "mt: ${MT_S:-480} s, size $size, variant $variant, seeds" $seeds
            pairs=()
            [ -n "${MT_EPOCHS:-}" ] && pairs=(--epochs "$MT_EPOCHS")
            [ "$variant" = none ] && pairs=(--epochs "${MT_EPOCHS:-1}")  # those specs' 20 epochs do not fit
            if [ -n "${MT_PAIRS:-}" ]; then
                n=$($PY benchmarks/mt_pairs.py --log "$OUT/session.log" --seconds "${MT_S:-480}" --size "$size" \
                    --processes $((2 * ${MT_SEEDS:-3})) --epochs "${MT_EPOCHS:-1}" --pairs "$MT_PAIRS" \
                    ${MT_BATCH_PAIRS:+--batch-pairs "$MT_BATCH_PAIRS"}) \
                    || { echo "mt: no pair count"; status=1; continue; }
                echo "mt: $n training pairs"
                pairs+=(--max-train-pairs "$n")
            fi
            rm -f "$RUNS"/mt*.json "$RUNS"/mt*.md  # an earlier call's parts (a warm machine keeps runs/)
            mkdir -p "$RUNS/logs"
            pids=()
            for seed in $seeds; do
                for encoder in transformer big; do
                    name=mt_${encoder}_$seed
                    timeout "${MT_S:-480}" $PY benchmarks/mt_results.py --size "$size" --first-seed "$seed" --seeds 1 \
                        --test-sets tvsub wmt22 tatoeba "${recipe[@]}" --no-tracking \
                        ${MT_EXTRA:-} "${pairs[@]}" --only "$encoder" --runs-dir "$RUNS/mt" --out "$RUNS/$name.json" \
                        --results "$RUNS/$name.md" > "$RUNS/logs/$name.log" 2>&1 &
                    pids+=($!)
                done
            done
            failed=0
            for pid in "${pids[@]}"; do  # not a bare wait: it would wait for the log's tee too
                wait "$pid" || failed=$((failed + 1))
            done
            tail -n 3 "$RUNS"/logs/mt_*.log
            [ $failed -eq 0 ] || { echo "mt: $failed of ${#pids[@]} trainings failed or ran out of time"; status=1; }
            $PY benchmarks/mt_results.py --combine "$RUNS"/mt_*.json --out "$RUNS/mt.json" --results "$RUNS/mt.md" \
                --section "## Translation on a GPU"
            ;;
        lb|lbert) timeout "${LB_S:-540}" $PY benchmarks/lattice_bert.py --chars-budget "${LB_CHARS:-all}" \
                --epochs 1 --seeds 1 --tasks resume chnsenticorp bq thucnews "${precision[@]}" --no-tracking ${LB_EXTRA:-} \
                --models lattice_bert char_bert --runs-dir "$RUNS/lb" --out "$RUNS/lb.json" \
                --results "$RUNS/lb.md" --section "## Lattice-BERT on a GPU" ;;
        ner) timeout "${NER_S:-540}" bash benchmarks/device_ner.sh ;;
        *) echo "unknown part $part (checks speed mt lb lbert ner)"; false ;;
    esac
    code=$?
    echo "=== $part: exit $code ($(date -u +%T))"
    [ $code -eq 0 ] || status=1
done
find "$RUNS" \( -name metrics.json -o -name config.json -o -name spec_hash -o -path "$RUNS/*.json" \
    -o -path "$RUNS/*.md" -o -path "$RUNS/logs/*" \) -print0 2>/dev/null \
    | tar -czf "$OUT/results.tar.gz" --null -T - benchmarks/RESULTS.md benchmarks/results
exit $status
