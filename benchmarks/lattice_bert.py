"""Lattice-BERT vs a character BERT of the same size, pre-trained on the same characters, then
fine-tuned on downstream tasks (issue 27): what only this script does. The CPU tables of
benchmarks/RESULTS.md (``## Lattice-BERT`` and the later budgets) are the suite
``jsonnet_configs/suites/lattice_bert.jsonnet``'s runs (``multigrain suite`` trains them: Ray, reused
and resumed runs, MLflow), made into tables by ``--suite`` (``lattice_bert_suite.py``; nothing trained):

    python benchmarks/lattice_bert.py --suite jsonnet_configs/suites/lattice_bert.jsonnet --budget 800k
        [--runs-dir runs] [--out JSON] [--results RESULTS.md] [--section HEADING] [--measure]
    python benchmarks/lattice_bert.py --count-corpus      # characters of each corpus source

``--suite ... --measure`` first counts the budget's pre-training corpus and times each finished
pre-training's training steps (``corpus_stats``, ``throughput``: the characters, lattice tokens and
speed columns, which no training's metrics hold) into their run directories.

The device call (``benchmarks/device_session.sh lb``) pre-trains and fine-tunes here, by itself:

    python benchmarks/lattice_bert.py --chars-budget N|all|fit:SECONDS [--epochs E] [--size tiny]
        [--models ...] [--tasks resume chnsenticorp bq thucnews] [--seeds S] [--finetune-epochs K]
        [--finetune-lr LR] [--finetune-max-instances M] [--mixed-precision bf16] [--side-by-side]
        [--export-weights DIR] [--workers 1 2] [--runs-dir runs/lattice_bert] [--out JSON] [--section HEADING]
    python benchmarks/lattice_bert.py --chars-budget fit:500 --tasks --side-by-side --no-corpus-stats \
        --throughput-batches 0 --batch-size 256 --lr 1e-3 --mixed-precision bf16 --export-weights $OUT ...
    python benchmarks/lattice_bert.py --import-weights DIR --out LB_JSON --tasks resume chnsenticorp bq thucnews

1. Pre-training (``jsonnet_configs/pretrain``): Lattice-BERT with MSP, the -MSP ablation (plain
   MLM over lattice tokens) and the character BERT, each reading the first ``--chars-budget``
   characters of the default corpus for ``--epochs`` epochs: all three process the same
   characters (budget x epochs). Reported per model: wall time, characters/s and lattice tokens/s
   (tokens = what the encoder reads: characters, words, [CLS]/[SEP]; timed on
   ``--throughput-batches`` training batches, the models' steps interleaved, validation excluded),
   the dev MSP accuracy, SOP accuracy and the leakage check (dev masked-token accuracy under
   whole-segment masking and under token masking, each model measured both ways).
2. Fine-tuning (``jsonnet_configs/finetune``): every task x seed from each pre-trained model;
   test F1 (NER), accuracy (classification, pairs), F1/EM (CMRC 2018).
3. ``--workers 1 2``: pre-training wall time with ``multigrain train --workers N`` (Ray Train,
   data parallel) on the same spec; skipped when this checkout's ``multigrain train`` has no
   ``--workers``.

``fit:SECONDS`` pre-trains a probe first (``fit_budget``) and reads as much of the corpus as ends
within SECONDS (all of it when it fits); ``--side-by-side`` runs the pre-trainings at once, each in
a process of its own (on the one GPU); ``--export-weights`` writes ``weights_pack`` parts (bf16, at
most 8 files of 16 MiB); ``--import-weights`` unpacks them into ``--runs-dir``/imported and
fine-tunes from them here, the pre-training rows kept from ``--out`` (the device's JSON).

Runs are ``multigrain.platform.runs.Run`` trainings in ``--runs-dir`` (a finished run directory is
reused, an interrupted one resumed), logged to MLflow unless ``--no-tracking``. The whole corpus is
about 10.8M characters (RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from lattice_bert_report import corpus_stats, count_corpus, section  # noqa: E402
from multigrain.platform.digits import whole_number  # noqa: E402

PRETRAINED = {  # name -> (pre-training spec, encoder for the fine-tuning specs)
    "lattice_bert": ("lattice_bert_{size}", "lattice_bert"),
    "lattice_bert_mlm": ("lattice_bert_{size}_mlm", "lattice_bert"),
    "char_bert": ("char_bert_{size}", "char_bert"),
}
FINETUNE = {"resume": "resume_ner", "msra": "msra_ner", "chnsenticorp": "chnsenticorp", "thucnews": "thucnews",
            "bq": "bq", "cmrc2018": "cmrc2018"}
HEADLINE = {"ner": "f1", "cls": "accuracy", "pair": "accuracy", "mrc": "f1"}


#: --finetune-max-instances cuts a test file to a hash bucket of this fraction instead of its first
#: lines (THUCNews test.txt is sorted by class: its first 1,000 headlines are all class 3)
TEST_BUCKET = {"thucnews": 0.1}
CORPUS_CHARS = 10_809_170  # the whole default corpus (--count-corpus; RESULTS.md)


def pretrain_spec(name: str, size: str, chars_budget: int, epochs: int, batch_size: int | None,
                  mixed_precision: str | None = None, lr: float | None = None) -> dict:
    from multigrain.platform.specs import load_spec

    stem = PRETRAINED[name][0].format(size=size)
    spec = load_spec(ROOT / "jsonnet_configs" / "pretrain" / f"{stem}.jsonnet")
    spec["dataset_reader"]["max_chars"] = chars_budget
    spec["trainer"]["num_epochs"] = epochs
    if batch_size:
        spec["data_loader"]["batch_size"] = batch_size
    if mixed_precision:
        spec["trainer"]["mixed_precision"] = mixed_precision
    if lr:
        spec["trainer"]["optimizer"]["lr"] = lr
    return spec


def throughput(specs: dict, max_batches: int) -> dict:
    """Training speed of each model (name -> spec) on its spec's first ``max_batches`` batches
    (forward, backward, AdamW step; one warm-up batch first), validation excluded: characters/s
    and lattice tokens/s. The models' steps are interleaved (A, B, C, A, B, C, ...) so that a
    machine whose load changes slows them alike."""
    import torch

    from multigrain.platform.config import build
    from multigrain.platform.experiment import Experiment, batches_for, build_vocabulary, read_all
    from multigrain.platform.devices import move_to, pick_device

    device = pick_device(None)
    state = {}
    for name, spec in specs.items():
        exp = build(Experiment, spec)
        train_set = read_all(exp.dataset_reader, exp.train_data_path)
        torch.manual_seed(exp.seed)
        model = exp.model.construct(vocab=build_vocabulary(exp, exp.model_class(), train_set, [])).to(device).train()
        batches = batches_for(model, train_set, exp.data_loader, exp.seed, True).epoch(0)
        state[name] = {"model": model, "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-4),
                       "batches": batches, "words": spec["model"]["use_words"],
                       "seconds": 0.0, "chars": 0, "tokens": 0, "steps": 0}
    for k in range(max_batches + 1):
        for s in state.values():
            chunk, batch = next(s["batches"], (None, None))
            if chunk is None:
                continue
            started = time.perf_counter()
            loss = s["model"](**move_to(batch, device))["loss"]
            s["optimizer"].zero_grad()
            loss.backward()
            s["optimizer"].step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if k == 0:
                continue  # warm-up
            s["seconds"] += time.perf_counter() - started
            s["steps"] += 1
            s["chars"] += sum(len(x["chars"]) + len(x.get("chars_b", ())) for x in chunk)
            s["tokens"] += int(batch["lattice"].mask.sum()) if s["words"] else int(batch["mask"].sum())
    return {name: {"batches": s["steps"], "seconds": s["seconds"], "chars_per_s": s["chars"] / s["seconds"],
                   "tokens_per_s": s["tokens"] / s["seconds"]} for name, s in state.items() if s["seconds"]}


def train(spec: dict, run_dir: Path, track: bool, uri: str | None) -> dict:
    from results_md import train_or_reuse

    return train_or_reuse(spec, run_dir, uri, track=track)


def pretrain_one(args, name: str) -> dict:
    """One model's pre-training (a run directory of ``--runs-dir``) and its row of the report."""
    from multigrain.platform.specs import spec_hash

    os.chdir(ROOT)  # a spawned process: the specs' data paths are relative to the repository root
    spec = pretrain_spec(name, args.size, args.chars_budget, args.epochs, args.batch_size, args.mixed_precision,
                         getattr(args, "lr", None))
    run_dir = Path(args.runs_dir) / f"pretrain-{name}-{spec_hash(spec)[:8]}"
    kept = run_dir / "corpus_stats.json"  # counting builds every lattice again: minutes at millions of chars
    if kept.exists():
        stats = json.loads(kept.read_text(encoding="utf-8"))
    elif getattr(args, "corpus_stats", True):
        stats = corpus_stats(spec)
    else:  # --no-corpus-stats (a device call): the budget, not a count
        stats = {"instances": None, "chars": args.chars_budget, "tokens": None}
    read_seconds = None
    if getattr(args, "probe", False):  # fit_budget: the reading's rate apart from the training's
        from multigrain.platform.config import build
        from multigrain.platform.experiment import Experiment, read_all

        exp = build(Experiment, spec)
        read_started = time.time()
        read_all(exp.dataset_reader, exp.train_data_path)
        read_seconds = time.time() - read_started
    started = time.time()
    result = train(spec, run_dir, not args.no_tracking, args.tracking_uri)
    if not kept.exists() and stats["tokens"] is not None:
        tmp = kept.with_name(kept.name + ".tmp")
        tmp.write_text(json.dumps(stats), encoding="utf-8")
        tmp.replace(kept)
    seconds = result.get("training_seconds") or (time.time() - started)
    dev = result.get("validation", {})
    row = {"run_dir": str(run_dir), "spec_hash": result["spec_hash"], "device": result.get("device"),
           "training_seconds": seconds, "wall_seconds": time.time() - started, "read_seconds": read_seconds,
           **stats, "epochs": args.epochs,
           "dev": {k: dev.get(k) for k in ("msp_accuracy", "sop_accuracy", "segment_masked_accuracy",
                                           "token_masked_accuracy", "msp_loss")}}
    print(json.dumps({name: row}, indent=1), flush=True)
    return row


def pretrain_all(args) -> dict:
    """Every ``--models`` pre-training: one after the other, or with ``--side-by-side`` each in a
    process of its own at the same time (on one GPU, as the device call does)."""
    if getattr(args, "side_by_side", False) and len(args.models) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(len(args.models), mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = dict(zip(args.models, pool.map(pretrain_one, [args] * len(args.models), args.models)))
        out = {name: rows[name] for name in args.models}
    else:
        out = {name: pretrain_one(args, name) for name in args.models}
    speeds = throughput({name: pretrain_spec(name, args.size, args.chars_budget, args.epochs, args.batch_size)
                         for name in args.models}, args.throughput_batches) if args.throughput_batches else {}
    for name, speed in speeds.items():
        out[name]["throughput"] = speed
    return out


def finetune_all(args, pretrained: dict) -> dict:
    from multigrain.platform.specs import load_spec, spec_hash

    out: dict = {}
    for task in args.tasks:
        for name in args.finetune_models:
            encoder = PRETRAINED[name][1]
            for seed in range(13, 13 + args.seeds):
                spec = load_spec(ROOT / "jsonnet_configs" / "finetune" / f"{FINETUNE[task]}.jsonnet",
                                 ext_vars={"pretrained": pretrained[name]["run_dir"], "encoder": encoder})
                spec["seed"] = seed
                if args.mixed_precision:
                    spec["trainer"]["mixed_precision"] = args.mixed_precision
                if args.finetune_epochs:
                    spec["trainer"]["num_epochs"] = args.finetune_epochs
                if args.finetune_lr:
                    spec["trainer"]["optimizer"]["lr"] = args.finetune_lr
                if args.finetune_max_instances:
                    for key in ("dataset_reader", "validation_dataset_reader", "test_dataset_reader"):
                        if key in spec:
                            spec[key]["max_instances"] = args.finetune_max_instances
                    if "validation_dataset_reader" not in spec:  # the test set is read with it
                        spec["validation_dataset_reader"] = dict(spec["dataset_reader"])
                    if task in TEST_BUCKET:  # a file sorted by class: a hash bucket, not its first lines
                        test = spec["test_dataset_reader"]
                        del test["max_instances"]
                        test.update(split="test", test_fraction=TEST_BUCKET[task])
                run_dir = Path(args.runs_dir) / f"finetune-{task}-{name}-seed{seed}-{spec_hash(spec)[:8]}"
                result = train(spec, run_dir, not args.no_tracking, args.tracking_uri)
                metric = HEADLINE[spec["task"]]
                test = result.get("test", {})
                row = out.setdefault(task, {}).setdefault(name, {"metric": metric, "seeds": {}})
                row["seeds"][seed] = {metric: test.get(metric), "em": test.get("em"),
                                      "seconds": result.get("seconds")}
                print(task, name, seed, metric, test.get(metric), flush=True)
    return out


def workers_scaling(args) -> dict:
    """Wall time of ``multigrain train --workers N`` on the Lattice-BERT spec (same global batch)."""
    help_text = subprocess.run([sys.executable, "-m", "multigrain.platform.cli", "train", "--help"], cwd=ROOT,
                               capture_output=True, text=True).stdout
    if "--workers" not in help_text:
        return {"skipped": "this checkout's multigrain train has no --workers (Ray Train: another branch)"}
    out = {}
    spec = ROOT / "jsonnet_configs" / "pretrain" / f"lattice_bert_{args.size}.jsonnet"
    for n in args.workers:
        run_dir = Path(args.runs_dir) / f"workers{n}-{int(time.time())}"
        started = time.time()
        proc = subprocess.run([sys.executable, "-m", "multigrain.platform.cli", "train", str(spec), "-s", str(run_dir),
                               "--workers", str(n), "--no-tracking", "-o", f"dataset_reader.max_chars={args.chars_budget}",
                               "-o", f"trainer.num_epochs={args.epochs}"], cwd=ROOT, capture_output=True, text=True)
        out[n] = {"seconds": time.time() - started, "returncode": proc.returncode,
                  "error": proc.stderr[-500:] if proc.returncode else None}
    return out


def chars_budget(text: str):
    """``--chars-budget``: a positive number of characters, ``all`` (the whole corpus), or
    ``fit:SECONDS`` (``("fit", seconds)``: what fits, ``fit_budget``)."""
    if text == "all":
        return CORPUS_CHARS
    if text.startswith("fit:"):
        try:
            seconds = float(text[4:])
        except ValueError:
            seconds = float("nan")
        if not seconds > 0:
            raise argparse.ArgumentTypeError(f"fit:SECONDS: expected a positive number of seconds, got {text!r}")
        return ("fit", seconds)
    chars = whole_number(text)
    if not chars:
        raise argparse.ArgumentTypeError(f"expected a positive number of characters or 'all', got {text!r}")
    return chars


def main(argv=None) -> int:
    if "--suite" in (sys.argv[1:] if argv is None else argv):  # the tables of a suite's runs: nothing trained
        import lattice_bert_suite

        return lattice_bert_suite.main(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count-corpus", action="store_true", help="count the corpus sources' characters")
    parser.add_argument("--chars-budget", type=chars_budget,
                        help="characters of the corpus each pre-training reads per epoch ('all': the whole corpus; "
                             "'fit:SECONDS': as many as end within SECONDS of the start, measured by a probe first)")
    parser.add_argument("--fit-probe-chars", type=int, default=200_000,
                        help="--chars-budget fit:SECONDS: characters of each probe pre-training (default 200000)")
    parser.add_argument("--fit-margin", type=float, default=45.0,
                        help="--chars-budget fit:SECONDS: seconds kept for the processes' start, the export and the report "
                             "(default 45)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=None, help="pre-training batch (the spec's: 64)")
    parser.add_argument("--lr", type=float, default=None, help="pre-training AdamW rate (the spec's: 6e-4)")
    parser.add_argument("--side-by-side", action="store_true",
                        help="the pre-trainings at the same time, each in a process of its own")
    parser.add_argument("--no-corpus-stats", dest="corpus_stats", action="store_false",
                        help="do not count the corpus's lattice tokens first (it builds every lattice once more)")
    parser.add_argument("--export-weights", metavar="DIR",
                        help="after pre-training, the models' weights into DIR: bf16, at most 8 files of 16 MiB")
    parser.add_argument("--import-weights", metavar="DIR",
                        help="no pre-training: the models of DIR (--export-weights elsewhere) are fine-tuned; the "
                             "pre-training rows come from --out")
    parser.add_argument("--size", default="tiny", choices=["tiny", "lite", "base"])
    parser.add_argument("--throughput-batches", type=int, default=10, help="training batches timed per model")
    parser.add_argument("--models", nargs="*", default=list(PRETRAINED), choices=list(PRETRAINED))
    parser.add_argument("--finetune-models", nargs="*", default=["lattice_bert", "char_bert"], choices=list(PRETRAINED))
    parser.add_argument("--tasks", nargs="*", default=["resume", "msra", "chnsenticorp", "bq"], choices=list(FINETUNE))
    parser.add_argument("--seeds", type=int, default=3, help="fine-tuning seeds 13 .. 12 + SEEDS")
    parser.add_argument("--finetune-epochs", type=int, default=None)
    parser.add_argument("--finetune-lr", type=float, default=None, help="the fine-tuning specs' AdamW rate (1e-4)")
    parser.add_argument("--finetune-max-instances", type=int, default=None, help="cut every split (smoke tests)")
    parser.add_argument("--workers", type=int, nargs="*", default=[], help="e.g. 1 2: Ray Train scaling")
    parser.add_argument("--mixed-precision", choices=("bf16", "fp16"), default=None,
                        help="trainer.mixed_precision of every training (CUDA only; part of the spec hash)")
    parser.add_argument("--runs-dir", default="runs/lattice_bert")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "lattice_bert.json"))
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--no-tracking", action="store_true")
    parser.add_argument("--note", default="", help="a line written under the tables (e.g. 'smoke run')")
    parser.add_argument("--section", default="## Lattice-BERT",
                        help="the RESULTS.md heading to write (another budget: another section and --out)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)  # the specs' data paths are relative to the repository root
    from results_md import write_section
    from multigrain.platform.devices import describe_device, pick_device

    out = Path(args.out)
    report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    if args.count_corpus:
        report["corpus"] = count_corpus()
    from lattice_bert_device import export_weights, fit_budget, import_weights

    if isinstance(args.chars_budget, tuple):  # fit:SECONDS
        args.chars_budget, report["fit"] = fit_budget(args, args.chars_budget[1], args.fit_probe_chars, args.fit_margin)
    if args.chars_budget:
        missing = sorted(set(args.finetune_models) - set(args.models))
        if missing:
            parser.error(f"--finetune-models {missing} need their pre-training: add them to --models")
        batch = pretrain_spec(args.models[0], args.size, args.chars_budget, args.epochs,
                              args.batch_size)["data_loader"]["batch_size"]
        report["setup"] = {"size": args.size, "chars_budget": args.chars_budget, "epochs": args.epochs,
                           "batch_size": batch,
                           "device": describe_device(pick_device(None)), "seeds": args.seeds,
                           "finetune_epochs": args.finetune_epochs,
                           "finetune_lr": args.finetune_lr, "finetune_max_instances": args.finetune_max_instances}
        report["pretraining"] = pretrain_all(args)
        if args.export_weights:
            report["export"] = export_weights(report["pretraining"], Path(args.export_weights))
        report["finetuning"] = finetune_all(args, report["pretraining"]) if args.tasks else {}
        report["workers"] = workers_scaling(args) if args.workers else report.get("workers")
        report["note"] = args.note
    elif args.import_weights:
        report["pretraining"] = import_weights(report, Path(args.import_weights), Path(args.runs_dir))
        report.setdefault("setup", {}).update(seeds=args.seeds, finetune_epochs=args.finetune_epochs,
                                              finetune_lr=args.finetune_lr,
                                              finetune_max_instances=args.finetune_max_instances,
                                              finetune_device=describe_device(pick_device(None)))
        missing = sorted(set(args.finetune_models) - set(report["pretraining"]))
        if missing:
            parser.error(f"--finetune-models {missing}: not in {args.import_weights}")
        report["finetuning"] = finetune_all(args, report["pretraining"]) if args.tasks else {}
    elif not args.count_corpus:
        parser.error("give --suite (the tables of a suite's runs), --chars-budget (pre-train and fine-tune), "
                     "--import-weights and/or --count-corpus")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, out)
    write_section(args.section, section(report), Path(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
