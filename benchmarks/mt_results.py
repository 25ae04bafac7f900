"""Translation (zh->en) results: Transformer encoder vs BiG-Transformer encoder, the same
``nmt_decoder``, sizes, data, batches and epochs (``jsonnet_configs/mt/tvsub_{transformer,big}[_small].jsonnet``),
several seeds; BLEU on every test set of the specs (tvsub: 3 references, wmt22: 2, wmt18/19/20, the
Tatoeba test split), model sizes and training time.

    python benchmarks/mt_results.py [--size small|base] [--seeds 3] [--first-seed 13] [--epochs N] [--max-train-pairs N]
        [--max-test-sentences N] [--max-dev-sentences N] [--only transformer big] [--test-sets ...] [--score-sets ...]
        [--runs-dir runs/mt] [--tracking-uri URI | --no-tracking] [--suite jsonnet_configs/suites/mt.jsonnet]
        [--results benchmarks/RESULTS.md] [--out benchmarks/results/translation.json]

The uncut specs are the suite ``jsonnet_configs/suites/mt.jsonnet``: ``multigrain suite`` trains
them (Ray, reused and resumed runs, MLflow), and ``--suite jsonnet_configs/suites/mt.jsonnet``
makes this table of its finished runs without training (``-o``: the suite call's overrides, as
``device_session.sh mt`` gives both). This script's own trainings are what a suite does not
measure: each run's CPU time and load, and test sets scored after training.

``--size base`` (``tvsub_*.jsonnet``, Transformer base: 6+6 layers of 512) is for a GPU, ``small``
(``tvsub_*_small.jsonnet``, 3+3 layers of 256) for a CPU budget. ``--variant V`` takes
``tvsub_*_<size>_V.jsonnet`` instead: ``cpu`` (issue 40's 40-minute CPU recipe) or ``gpu`` (its
device call: every pair in token batches, bf16 where there is a GPU). ``--max-train-pairs N`` keeps the first N
TVsub training pairs (episode order; the validation set stays whole). ``--max-test-sentences N``
cuts every test set and ``--max-dev-sentences N`` the validation set (smoke tests: their figures are
not results; give them their own ``--results`` and ``--out``). Each (encoder, seed) is one training
(``results_md.train_or_reuse``, as ``multigrain train``: a finished run directory reused, an interrupted
one resumed), logged to MLflow with its test-set rows (experiments ``mt/<set>``). The per-run figures
go to ``--out`` (JSON) and the table to the ``## Translation (zh→en)`` section of ``--results``
(the other sections are left as they are). ``--score-sets`` scores finished runs on sets they were
not trained with (``score_after_training``: the news sets of a CPU budget, decoded after the fact
without retraining; the table names them).
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import results_md  # noqa: E402

SECTION = "## Translation (zh→en)"
ENCODERS = ("transformer", "big")
TEST_SETS = ("tvsub", "wmt22", "wmt18", "wmt19", "wmt20", "tatoeba")
TVSUB_TRAIN_PAIRS = 429_501  # every training pair of tvsub_zh_en (SOURCES.md)
REFERENCES = {"tvsub": 3, "wmt22": 2, "wmt18": 1, "wmt19": 1, "wmt20": 1, "tatoeba": 1}


def spec_path(encoder: str, size: str, variant: str | None = None) -> Path:
    """``tvsub_<encoder>.jsonnet`` (size base), ``tvsub_<encoder>_small.jsonnet``, or with a
    ``variant`` ``tvsub_<encoder>_<size>_<variant>.jsonnet``."""
    name = f"tvsub_{encoder}" + (f"_{size}_{variant}" if variant else ("" if size == "base" else f"_{size}"))
    return ROOT / "jsonnet_configs" / "mt" / f"{name}.jsonnet"


def prepared_spec(encoder: str, size: str, seed: int, epochs: int | None = None,
                  max_train_pairs: int | None = None, max_test_sentences: int | None = None,
                  test_sets: tuple[str, ...] = TEST_SETS, variant: str | None = None,
                  max_dev_sentences: int | None = None) -> dict:
    """The shipped spec of ``encoder`` at ``size`` (and ``variant``) with the benchmark's seed and
    budget cuts, and only the ``test_sets`` named (of those the spec has)."""
    from multigrain.platform.specs import load_spec

    spec = load_spec(spec_path(encoder, size, variant))
    spec["seed"] = seed
    if epochs is not None:
        spec["trainer"]["num_epochs"] = epochs
    if max_train_pairs is not None:  # validation keeps the whole dev set: its own reader, uncut
        spec["validation_dataset_reader"] = copy.deepcopy(spec["dataset_reader"])
        spec["validation_dataset_reader"].pop("max_instances", None)
        spec["dataset_reader"]["max_instances"] = max_train_pairs
    if max_dev_sentences is not None:
        spec["validation_dataset_reader"] = copy.deepcopy(spec.get("validation_dataset_reader", spec["dataset_reader"]))
        spec["validation_dataset_reader"]["max_instances"] = max_dev_sentences
    spec["test_sets"] = {name: entry for name, entry in spec["test_sets"].items() if name in test_sets}
    if max_test_sentences is not None:
        for entry in spec["test_sets"].values():
            entry["reader"]["max_instances"] = max_test_sentences
    return spec


def tiny_tatoeba_spec(train_pairs: int, dev_pairs: int, test_pairs: int) -> dict:
    """``mt/tatoeba_tiny.jsonnet`` cut to a check's size: one epoch, the Tatoeba test set alone."""
    from multigrain.platform.specs import load_spec

    spec = load_spec(ROOT / "jsonnet_configs" / "mt" / "tatoeba_tiny.jsonnet")
    spec["dataset_reader"]["max_instances"] = train_pairs
    spec["validation_dataset_reader"]["max_instances"] = dev_pairs
    spec["trainer"]["num_epochs"] = 1
    spec["test_sets"] = {"tatoeba": spec["test_sets"]["tatoeba"]}
    spec["test_sets"]["tatoeba"]["reader"]["max_instances"] = test_pairs
    return spec


def run_dir_for(encoder: str, spec: dict, runs_dir: str, size: str, max_train_pairs: int | None,
                variant: str | None = None) -> Path:
    from multigrain.platform.specs import spec_hash

    cut = f"-{max_train_pairs}pairs" if max_train_pairs else ""
    recipe = f"_{variant}" if variant else ""
    return Path(runs_dir) / (f"tvsub_{encoder}-{size}{recipe}-e{spec['trainer']['num_epochs']}{cut}-seed{spec['seed']}-"
                             f"{spec_hash(spec)[:8]}")


def score_after_training(run_dir: Path, spec_with_sets: dict, names: list[str]) -> dict:
    """name -> ``{data, examples, metrics, tracking_tags}`` (a ``metrics.json`` test-set entry) of the
    finished run in ``run_dir`` on test sets its spec does not name, each read with its reader in
    ``spec_with_sets``. The run keeps its identity and vocabulary: characters seen only in these sets
    are unknown to it. Kept in ``<run_dir>/scored_after_training.json`` and reused."""
    from multigrain.platform.runs import Run
    from multigrain.platform.test_sets import tracking_tags
    from multigrain.platform.training import evaluate

    kept = run_dir / "scored_after_training.json"
    scores = json.loads(kept.read_text(encoding="utf-8")) if kept.exists() else {}
    todo = [name for name in names if name not in scores]
    if todo:
        sets = Run(spec_with_sets).experiment.test_sets  # validated and built as for training; nothing written
        run = Run.open(run_dir)
        archive = run.load_archive()
        for name in todo:
            reader = sets[name].reader or run.experiment.test_dataset_reader
            instances = list(reader.read(sets[name].path))
            metrics = evaluate(archive.model, archive.batches(instances), archive.device, f"test {name}")
            scores[name] = {"data": sets[name].path, "examples": len(instances), "metrics": metrics,
                            "tracking_tags": tracking_tags(archive.model)}
            tmp = kept.with_name(kept.name + ".tmp")
            tmp.write_text(json.dumps(scores, indent=1, ensure_ascii=False), encoding="utf-8")
            tmp.replace(kept)
    return {name: scores[name] for name in names}


def count_parameters(spec: dict, run_dir: Path) -> int:
    """Trainable parameters of the trained model (its archive, loaded on the CPU)."""
    from multigrain.platform.runs import Run

    model = Run(spec, run_dir, check_data_paths=False).load_archive(device="cpu").model
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def row_of(encoder: str, seed: int, size: str, result: dict, parameters: int) -> dict:
    sets = result.get("test_sets") or {}
    return {"encoder": encoder, "seed": seed, "size": size, "parameters": parameters,
            "training_seconds": result.get("training_seconds", result.get("seconds")),
            "seconds": result.get("seconds"),  # the whole run: data, training, every evaluation
            "epochs": result.get("epochs_completed"), "best_epoch": result.get("best_epoch"),
            "device": result.get("device", ""), "run_dir": result.get("run_dir", ""),
            "spec_hash": result.get("spec_hash", ""),
            "dev_bleu": (result.get("validation") or {}).get("bleu"),
            "bleu": {name: entry["metrics"].get("bleu") for name, entry in sets.items()},
            "chrf": {name: entry["metrics"].get("chrf") for name, entry in sets.items()},
            "examples": {name: entry["examples"] for name, entry in sets.items()},
            "signature": {name: (entry.get("tracking_tags") or {}).get("sacrebleu_signature", "")
                          for name, entry in sets.items()}}


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (its threads included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def budget_of(spec: dict, result: dict, cpu_before: float, load_before: tuple) -> dict:
    """What a run cost, beside its wall-clock ``seconds``: ``cpu_seconds`` of this process over
    the run (reading, training, validation, test decoding; 0 for a reused run), the 1/5/15-minute
    load averages before and after it (a loaded machine stretches wall time, not CPU time), the
    training pairs seen and the updates (batches of a fixed size; None for token batches)."""
    pairs = spec["dataset_reader"].get("max_instances") or TVSUB_TRAIN_PAIRS
    epochs = result.get("epochs_completed") or 0
    loader = spec["data_loader"]
    updates = None if "max_tokens" in loader else math.ceil(pairs / loader["batch_size"]) * epochs
    return {"cpu_seconds": round(process_cpu_seconds() - cpu_before, 1),
            "load_average": {"before": [round(x, 2) for x in load_before],
                             "after": [round(x, 2) for x in os.getloadavg()]},
            "pairs_seen": pairs * epochs, "updates": updates}


def mean_sd(values: list[float]) -> str:
    """``27.31 ± 0.42`` (sample sd) over several values, the value alone for one, "–" for none."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}"


def seeds_note(scored: list[dict], runs: list[dict]) -> str:
    """`` (seed 13)`` where only some of an encoder's runs were scored on a set."""
    if len(scored) == len(runs):
        return ""
    return f" (seed{'s' if len(scored) > 1 else ''} {', '.join(str(r['seed']) for r in scored)})"


def table(rows: list[dict], settings: dict) -> list[str]:
    """The section's lines: one row per encoder (BLEU mean ± sd over its seeds on every test set),
    BiG minus Transformer on each set, and how the figures were made."""
    encoders = [e for e in ENCODERS if any(r["encoder"] == e for r in rows)]
    sets = [s for s in TEST_SETS if any(s in r["bleu"] for r in rows)]
    head = ["encoder", "seeds", "parameters", "training time (min)", "dev BLEU",
            *[f"{s} ({REFERENCES.get(s, 1)} ref{'s' if REFERENCES.get(s, 1) > 1 else ''})" for s in sets]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    means: dict[str, dict[str, float]] = {}
    for encoder in encoders:
        runs = [r for r in rows if r["encoder"] == encoder]
        means[encoder] = {s: statistics.fmean([r["bleu"][s] for r in runs if s in r["bleu"]]) for s in sets
                          if any(s in r["bleu"] for r in runs)}
        minutes = [r["training_seconds"] / 60 for r in runs if r["training_seconds"] is not None]
        lines.append("| " + " | ".join([
            encoder, str(len(runs)), f"{runs[0]['parameters']:,}", mean_sd(minutes),
            mean_sd([r["dev_bleu"] for r in runs]),
            *[mean_sd([r["bleu"].get(s) for r in runs]) + seeds_note([r for r in runs if s in r["bleu"]], runs)
              for s in sets]]) + " |")
    if set(encoders) == set(ENCODERS):
        lines.append("| BiG − Transformer (means) | | | | | " + " | ".join(
            f"{means['big'][s] - means['transformer'][s]:+.2f}" for s in sets) + " |")
    lines += ["", f"BLEU: sacrebleu corpus BLEU, case-insensitive (the TVsub references are lower-cased), "
                  f"every reference stream of the set; mean ± sample sd over seeds. "
                  f"Signatures: {', '.join(sorted({sig for r in rows for sig in r['signature'].values() if sig}))}.",
              f"Settings: size `{settings['size']}`, {settings['epochs']} epochs, batch {settings['batch_size']}, "
              f"{settings['train_pairs']} TVsub training pairs, seeds {settings['seeds']}; "
              f"device: {', '.join(sorted({r['device'] for r in rows}))}; {settings['date']}. "
              f"Same decoder, sizes, data, batches and epochs for both encoders "
              f"(`python benchmarks/mt_results.py {settings['argv']}`)."]
    if settings.get("suite"):  # the suite entries whose runs these rows are (tests/benchmarks/test_suites_cover_results.py)
        lines.append(f"Suite: `{settings['suite']}`.")
    later = sorted({name for r in rows for name in r.get("scored_after_training", [])}, key=TEST_SETS.index)
    if later:
        lines.append(f"Scored after training, not part of the runs' specs (characters seen only there are unknown "
                     f"to the models): {', '.join(later)}.")
    if settings.get("max_test_sentences") or settings.get("max_dev_sentences"):
        cuts = [f"every test set cut to its first {settings['max_test_sentences']} sentences"
                if settings.get("max_test_sentences") else "",
                f"the validation set to {settings['max_dev_sentences']}" if settings.get("max_dev_sentences") else ""]
        lines.append(f"**Smoke test**: {', '.join(c for c in cuts if c)}; these figures are not results.")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("small", "base"), default="small")
    parser.add_argument("--variant", choices=("cpu", "gpu"), default=None,
                        help="tvsub_*_<size>_<variant>.jsonnet: issue 40's recipes (cpu: 40 minutes of one core; "
                             "gpu: the device call's)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=13,
                        help="seeds --first-seed, +1, ... (run a part in another process, then all for the table)")
    parser.add_argument("--epochs", type=int, default=None, help="override trainer.num_epochs (both encoders)")
    parser.add_argument("--max-train-pairs", type=int, default=None, help="the first N TVsub training pairs")
    parser.add_argument("--max-test-sentences", type=int, default=None, help="cut every test set (smoke tests)")
    parser.add_argument("--max-dev-sentences", type=int, default=None, help="cut the validation set (smoke tests)")
    parser.add_argument("--only", nargs="*", choices=ENCODERS, default=list(ENCODERS))
    parser.add_argument("--test-sets", nargs="*", choices=TEST_SETS, default=list(TEST_SETS),
                        help="evaluate only these (the news sets decode long segments: slow on a CPU)")
    parser.add_argument("--score-sets", nargs="*", choices=TEST_SETS, default=[],
                        help="also score these on every finished run without training with them (the run is the "
                             "one --test-sets names; characters seen only in these sets are unknown to it)")
    parser.add_argument("--combine", nargs="*", default=None, metavar="JSON",
                        help="no training: the table of the runs in earlier --out files (parts run apart)")
    parser.add_argument("--mixed-precision", choices=("bf16", "fp16", "auto"), default=None,
                        help="trainer.mixed_precision (CUDA only; part of the spec hash)")
    parser.add_argument("--suite", metavar="SUITE",
                        help="no training: the table of this suite's finished runs (multigrain suite "
                             "jsonnet_configs/suites/mt.jsonnet); --only picks encoders")
    parser.add_argument("--config", metavar="TAG", help="with --suite: the runs of the entries' configuration TAG "
                                                        "(tvsub_*_small [160k-e1]: --config 160k-e1); default: untagged")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="with --suite: the suite call's -o (its runs' hashes include them)")
    parser.add_argument("--runs-dir", default=None, help="default runs/mt; with --suite its run directories' runs/")
    parser.add_argument("--tracking-uri", default=None, help="the MLflow store (default: ./mlruns.db)")
    parser.add_argument("--no-tracking", action="store_true",
                        help="log nothing to MLflow (a machine without it; `multigrain log RUN` logs a run later)")
    parser.add_argument("--results", default=str(results_md.RESULTS))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "translation.json"))
    parser.add_argument("--section", default=SECTION, help="the RESULTS.md heading the table is written under")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    smoke = args.max_test_sentences is not None or args.max_dev_sentences is not None
    if smoke and (Path(args.results).resolve() == results_md.RESULTS or
                  Path(args.out).resolve() == (ROOT / "benchmarks" / "results" / "translation.json")):
        parser.error("--max-test-sentences and --max-dev-sentences are smoke tests: give them their own --results "
                     "and --out")

    if args.combine:
        return combine([Path(p) for p in args.combine], Path(args.out), Path(args.results), args.section)
    if args.suite:
        return from_suite(args, argv)
    args.runs_dir = args.runs_dir or "runs/mt"
    rows = []
    # seeds outermost: an interrupted benchmark leaves both encoders with the same seeds
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for encoder in args.only:
            spec = prepared_spec(encoder, args.size, seed, args.epochs, args.max_train_pairs, args.max_test_sentences,
                                 tuple(args.test_sets), args.variant, args.max_dev_sentences)
            if args.mixed_precision:
                spec["trainer"]["mixed_precision"] = args.mixed_precision
            run_dir = run_dir_for(encoder, spec, args.runs_dir, args.size, args.max_train_pairs, args.variant)
            cpu_before, load_before = process_cpu_seconds(), os.getloadavg()
            result = results_md.train_or_reuse(spec, run_dir, args.tracking_uri,
                                               str(spec_path(encoder, args.size, args.variant)),
                                               track=not args.no_tracking)
            if not result.get("finished"):
                print(f"{run_dir}: training did not finish; left out", flush=True)
                continue
            later = [name for name in args.score_sets if name not in spec["test_sets"]]
            if later:
                with_sets = prepared_spec(encoder, args.size, seed, args.epochs, args.max_train_pairs,
                                          args.max_test_sentences, tuple(args.test_sets) + tuple(later), args.variant,
                                          args.max_dev_sentences)
                result = dict(result, test_sets={**result.get("test_sets", {}),
                                                 **score_after_training(run_dir, with_sets, later)})
            rows.append(row_of(encoder, seed, args.size, result, count_parameters(spec, run_dir)) |
                        {"scored_after_training": later} | budget_of(spec, result, cpu_before, load_before))
            print(f"{encoder} seed {seed}: BLEU {json.dumps(rows[-1]['bleu'])}", flush=True)
    if not rows:
        print("no finished run", file=sys.stderr)
        return 1
    settings = settings_of(spec, args.size + (f" ({args.variant} recipe)" if args.variant else ""),
                           range(args.first_seed, args.first_seed + args.seeds), argv, args.max_train_pairs,
                           args.max_test_sentences, args.max_dev_sentences)
    write_results(rows, settings, Path(args.out), Path(args.results), args.section)
    return 0


def settings_of(spec: dict, size: str, seeds, argv, max_train_pairs: int | None = None,
                max_test_sentences: int | None = None, max_dev_sentences: int | None = None) -> dict:
    """The table's settings line: what the runs of ``spec`` (one of them) share, and how they were made."""
    cut = max_train_pairs or spec["dataset_reader"].get("max_instances")
    loader = spec["data_loader"]
    return {"size": size, "epochs": spec["trainer"]["num_epochs"],
            "batch_size": loader["batch_size"] if "max_tokens" not in loader else
            f"at most {loader['max_tokens']:,} tokens (source + target)",
            "train_pairs": f"{cut:,}" if cut else f"all {TVSUB_TRAIN_PAIRS:,}",
            "seeds": ", ".join(str(s) for s in sorted(set(seeds))), "date": time.strftime("%Y-%m-%d"),
            "argv": " ".join(argv if argv is not None else sys.argv[1:]),
            "max_test_sentences": max_test_sentences, "max_dev_sentences": max_dev_sentences}


def from_suite(args, argv) -> int:
    """The table of a suite's finished translation runs of ``--size``/``--variant`` (``multigrain suite``
    trained them): nothing is trained; parameters are counted from each run's archive."""
    from multigrain.platform.experiment import identity
    from multigrain.platform.suite import load_suite, plan

    stems = {f"tvsub_{e}_{args.size}" + (f"_{args.variant}" if args.variant else "") for e in args.only}
    runs = [r for r in plan(args.suite, load_suite(args.suite), args.runs_dir or "runs", check_data_paths=False,
                            overrides=args.override)
            if Path(r.spec_path).name.split(".")[0] in stems and r.tag == (args.config or "")]
    rows, sizes = [], {}
    for r in runs:
        result = r.result()
        if result is None:
            print(f"{r.label}: no finished run in {r.run_dir}; left out", flush=True)
            continue
        parts = Path(r.spec_path).name.split(".")[0].split("_")[2:]  # tvsub_<encoder>[_<size>[_<variant>]]
        size = (parts[0] if parts else "base") + (f" ({parts[1]} recipe)" if len(parts) > 1 else "")
        sizes[size] = r.spec
        rows.append(row_of(identity(r.spec)["encoder"], r.seed, size, result, count_parameters(r.spec, Path(r.run_dir))))
    if len(sizes) != 1:
        print("no finished run" if not sizes else f"runs of several sizes ({', '.join(sizes)}): one table per size",
              file=sys.stderr)
        return 1
    (size, spec), = sizes.items()
    settings = settings_of(spec, size, [r["seed"] for r in rows], argv)
    suffix = args.size + (f"_{args.variant}" if args.variant else "") + (f" [{args.config}]" if args.config else "")
    only = f"tvsub_{args.only[0] if len(args.only) == 1 else '*'}_{suffix}"
    overrides = "".join(f" -o {o}" for o in args.override)
    settings["suite"] = f"multigrain suite {args.suite} --only '{only}'{overrides}"
    write_results(rows, settings, Path(args.out), Path(args.results), args.section)
    return 0


def write_results(rows: list[dict], settings: dict, out: Path, results: Path, section: str = SECTION) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"settings": settings, "runs": rows}, indent=2, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    tmp.replace(out)
    results_md.write_section(section, table(rows, settings), results)
    print(f"{results}: {section} written; runs in {out}")


def combine(parts: list[Path], out: Path, results: Path, section: str = SECTION) -> int:
    """One table from the runs of several ``--out`` files (same size, epochs, batch and pairs)."""
    loaded = [json.loads(p.read_text(encoding="utf-8")) for p in parts]
    keys = ("size", "epochs", "batch_size", "train_pairs", "max_test_sentences")
    first = loaded[0]["settings"]
    for part, data in zip(parts, loaded):
        if any(data["settings"].get(k) != first.get(k) for k in keys):
            print(f"{part}: its settings differ from {parts[0]}'s ({', '.join(keys)}): not one table", file=sys.stderr)
            return 2
    rows = sorted((r for data in loaded for r in data["runs"]), key=lambda r: (r["seed"], r["encoder"]))
    settings = dict(first, seeds=", ".join(str(s) for s in sorted({r["seed"] for r in rows})),
                    argv=" ` + `".join(data["settings"]["argv"] for data in loaded))
    write_results(rows, settings, out, results, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
