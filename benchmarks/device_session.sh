#!/usr/bin/env bash
# The GPU work of issues 26, 27 and 40, for one call of the `device` tool (a lent machine, about ten
# minutes of it): prepare here with `python benchmarks/device_kit.py --parts PARTS`, then run there
#   bash benchmarks/device_session.sh PARTS      (carry .device; see device_kit.py)
# PARTS, in order, each under its own time limit (seconds; environment overrides):
#   checks  benchmarks/cuda_checks.py: beam search and Lattice-BERT on CUDA = CPU, bf16 trainings,
#           the mt and lb budgets measured (its plan_mt, plan_lb lines)                         CHECKS_S=240
#           CHECKS="beam plan_mt ..." runs only those checks (default: all)
#   speed   benchmarks/mt_speed.py --device cuda (3 processes)                                      SPEED_S=150
#   mt      the runs of `multigrain suite jsonnet_configs/suites/mt.jsonnet --only 'tvsub_*_small_gpu'` as
#           processes (benchmarks/suite_processes.py: that machine has no Ray): both encoders x
#           MT_SEEDS seeds (default 3, from 13) side by side on the one GPU (issue 40's
#           recipe: pre-norm, inverse-sqrt schedule, token batches, bf16, one epoch of all TVsub pairs,
#           scored on the specs' test_sets tvsub wmt22 tatoeba), then mt_results.py --suite's table.
#           MT_EPOCHS overrides the specs' epochs; then, while the time allows, passes of one more epoch
#           each (up to MT_EPOCHS_MAX, default 8), each a table mt_e<N>.json/.md; MT_EXTRA adds suite
#           arguments (-o ...)                                                                   MT_S=480
#           MT_PAIRS=N trains on the first N pairs; MT_PAIRS=auto sizes N from this call's plan_mt line
#           (checks first) so that every training ends inside MT_S (mt_pairs.py); with
#           SESSION_S set, MT_S defaults to what is left of SESSION_S seconds (from this script's start) - 20
#   lb      benchmarks/lattice_bert.py, LB_CHARS characters (default the whole corpus), one seed,
#           four fine-tuning tasks (lbert: the same part)                                           LB_S=540
#   ner     bash benchmarks/device_ner.sh (BiG over a pretrained backbone for NER)                  NER_S=540
#   throughput  benchmarks/train_throughput.py --device cuda --pack-targets: our trainer against a bare loop
#           and Marian (THROUGHPUT_MODELS, default small,base,plte; THROUGHPUT_EXTRA: more
#           arguments, later ones win, e.g. "--diagnose --compile --profile")              THROUGHPUT_S=150
# Everything it writes comes back in $OUT: session.log and results.tar.gz (RESULTS.md with the GPU
# speed section, the mt/lb tables and JSON results, the mt trainings' logs, every run directory's
# metrics.json/config.json for `multigrain log` here). PYTHON and DEVICE (default python3, cuda;
# cpu: fp32) and MT_EXTRA / LB_EXTRA (more arguments) let a CPU machine rehearse the plumbing, e.g.
#   REHEARSAL=1 PYTHON=.venv/bin/python DEVICE=cpu MT_SEEDS=1 MT_PAIRS=300 MT_EXTRA="-o model.beam_size=1
#       -o +test_sets.tvsub.reader.max_instances=10 -o +test_sets.wmt22.reader.max_instances=10
#       -o +test_sets.tatoeba.reader.max_instances=10" bash benchmarks/device_session.sh mt
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
    # neither Ray nor MLflow is on that machine: here both fail to import, as they would there
    absent=$(mktemp -d)
    for module in ray mlflow; do
        mkdir "$absent/$module"
        echo "raise ImportError('$module is not on the device machine')" > "$absent/$module/__init__.py"
    done
    # the kit's backbone and jieba dictionary (device_kit.py's site.tar.gz), ahead of the installed ones
    if [ -f .device/site.tar.gz ]; then tar -xzf .device/site.tar.gz -C "$absent" || exit 3; fi
    export PYTHONPATH=$absent:$PWD
else
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .device/wheels/*.whl || { echo "wheels did not install"; exit 3; }
    if [ -f .device/site.tar.gz ]; then  # the ner part's backbone, jieba's dictionary (device_kit.py)
        tar -xzf .device/site.tar.gz -C /tmp/site || { echo "site.tar.gz did not unpack"; exit 3; }
    fi
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
            mt_end=$((SECONDS + ${MT_S:-480}))
            seeds=$(seq 13 $((12 + ${MT_SEEDS:-3})))
            echo "mt: ${MT_S:-480} s, the suite's tvsub_*_small_gpu entries, seeds" $seeds
            cut=()  # -o texts of the suite call and of its table (they are part of the runs' hashes)
            if [ -n "${MT_PAIRS:-}" ]; then
                n=$($PY benchmarks/mt_pairs.py --log "$OUT/session.log" --seconds "${MT_S:-480}" --size small \
                    --processes $((2 * ${MT_SEEDS:-3})) --epochs "${MT_EPOCHS:-1}" --pairs "$MT_PAIRS" \
                    ${MT_BATCH_PAIRS:+--batch-pairs "$MT_BATCH_PAIRS"}) \
                    || { echo "mt: no pair count"; status=1; continue; }
                echo "mt: $n training pairs"
                cut+=(-o "+dataset_reader.max_instances=$n")
            fi
            # shellcheck disable=SC2206
            cut+=(${MT_EXTRA:-})
            rm -f "$RUNS"/mt*.json "$RUNS"/mt*.md  # an earlier call's tables (a warm machine keeps runs/)
            mkdir -p "$RUNS/logs"
            # Passes: the suite's runs as processes side by side (that machine has no Ray:
            # suite_processes.py), first for MT_EPOCHS epochs (default: the specs' one), then, while the
            # time left exceeds 1.2 x the last pass, each run extended by one more epoch (--extend: a
            # copy of the shorter run trains the missing epoch alone, as a longer spec beside a finished
            # one does; the inverse-sqrt schedule never reads the run's length). Every pass is a finished
            # set of runs with its own table (mt_e<epochs>.json/.md). Runs still going 30 s before the
            # end are stopped, leaving time for the tables and the archive.
            # A pass of N epochs selects the suite's `tvsub_*_small_gpu [eN]` entries where it has them
            # (the same spec hashes as -o trainer.num_epochs=N, in those entries' run directories).
            epochs=${MT_EPOCHS:-1}
            while :; do
                [ $((mt_end - SECONDS)) -gt 60 ] || break
                pass_start=$SECONDS
                only=('tvsub_*_small_gpu') epoch_cut=() table=()
                if [ -n "${MT_EPOCHS:-}" ] || [ "$epochs" -gt 1 ]; then
                    if $PY -c "import sys; from multigrain.platform.suite import entry_labels, load_suite
sys.exit(f'tvsub_big_small_gpu [e{sys.argv[1]}]' not in
         {name for _, _, name, _ in entry_labels(load_suite('jsonnet_configs/suites/mt.jsonnet'))})" "$epochs"
                    then only=("tvsub_*_small_gpu [e$epochs]") table=(--config "e$epochs")
                    else epoch_cut=(-o "trainer.num_epochs=$epochs") table=("${epoch_cut[@]}")
                    fi
                fi
                echo "mt: pass of $epochs epoch(s), ${only[0]}, $((mt_end - SECONDS)) s left ($(date -u +%T))"
                # shellcheck disable=SC2086
                timeout -k 20 $((mt_end - SECONDS)) $PY benchmarks/suite_processes.py \
                    jsonnet_configs/suites/mt.jsonnet --only "${only[0]}" --seeds $seeds --extend \
                    --runs-dir "$RUNS/mt" --logs "$RUNS/logs" --seconds $((mt_end - SECONDS - 30)) \
                    "${epoch_cut[@]}" "${cut[@]}" \
                    || { echo "mt: a run of the $epochs-epoch pass failed or ran out of time"; status=1; break; }
                $PY benchmarks/mt_results.py --suite jsonnet_configs/suites/mt.jsonnet --variant gpu \
                    --runs-dir "$RUNS/mt" "${table[@]}" "${cut[@]}" --out "$RUNS/mt_e$epochs.json" \
                    --results "$RUNS/mt_e$epochs.md" --section "## Translation on a GPU, $epochs epoch(s)" \
                    | grep -v "no finished run"
                pass=$((SECONDS - pass_start))
                [ $((mt_end - SECONDS)) -gt $((pass * 12 / 10)) ] && [ "$epochs" -lt "${MT_EPOCHS_MAX:-8}" ] || break
                epochs=$((epochs + 1))
            done
            ;;
        lb|lbert) timeout "${LB_S:-540}" $PY benchmarks/lattice_bert.py --chars-budget "${LB_CHARS:-all}" \
                --epochs 1 --seeds 1 --tasks resume chnsenticorp bq thucnews "${precision[@]}" --no-tracking ${LB_EXTRA:-} \
                --models lattice_bert char_bert --runs-dir "$RUNS/lb" --out "$RUNS/lb.json" \
                --results "$RUNS/lb.md" --section "## Lattice-BERT on a GPU" ;;
        ner) timeout "${NER_S:-540}" bash benchmarks/device_ner.sh ;;
        throughput) timeout "${THROUGHPUT_S:-150}" $PY benchmarks/train_throughput.py --device "${DEVICE:-cuda}" \
                --models "${THROUGHPUT_MODELS:-small,base,plte}" --steps 20 --rounds 3 --instances 4000 --pack-targets \
                --out "$RUNS/train_throughput_gpu.json" ${THROUGHPUT_EXTRA:-} ;;
        *) echo "unknown part $part (checks speed mt lb lbert ner throughput)"; false ;;
    esac
    code=$?
    echo "=== $part: exit $code ($(date -u +%T))"
    [ $code -eq 0 ] || status=1
done
find "$RUNS" \( -name metrics.json -o -name config.json -o -name spec_hash -o -path "$RUNS/*.json" \
    -o -path "$RUNS/*.md" -o -path "$RUNS/logs/*" \) -print0 2>/dev/null \
    | tar -czf "$OUT/results.tar.gz" --null -T - benchmarks/RESULTS.md benchmarks/results
exit $status
