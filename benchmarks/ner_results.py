"""NER results: train every NER spec, log each run to MLflow (``ner/<dataset>``), and write the
``## NER results`` table of benchmarks/RESULTS.md (dev/test F1, epochs, minutes, the paper's
number beside ours).

    python benchmarks/ner_results.py [--specs resume_plte weibo_big ...] [--datasets resume ...]
        [--models plte big ...] [--epochs N] [--max-instances N] [--results benchmarks/RESULTS.md]
        [--runs-dir runs/ner] [--store JSON] [--tracking-uri URI] [--cuda-device N] [-o KEY.PATH=VALUE ... --tag NAME]

Each spec is one tracked training (``multigrain.platform.runs.Run`` with a ``RunLogger``,
as ``multigrain train`` does) in ``<runs-dir>/<spec>-e<epochs>[-max<N>]-<spec hash[:8]>``; a finished run
directory is reused and an unfinished one resumed, so the script can be re-run after an
interruption; ``--epochs`` larger than an earlier run's starts from a copy of that run when the
schedule does not depend on the epoch count (``train_or_reuse``), and the row's minutes include
the earlier epochs. Rows of earlier invocations, and of earlier sessions, stay in the table (kept in
the tracked ``benchmarks/results/ner_results.json``, or ``--store``); a spec trained again replaces its row. ``--max-instances``
cuts every split (a smoke test: the table says so). ``-o`` overrides every chosen spec as
``multigrain train -o`` does, for ablations; ``--tag`` names the configuration, whose rows
(``big [no_global]``) sit under the spec's own and say the overrides:

    python benchmarks/ner_results.py --specs resume_bilstm_big --tag no_global -o model.encoder.encoders.1.global_node=false
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import results_md  # noqa: E402
from results_md import add_override_options, check_override_options, mean_std, save_row, write_section  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SECTION = "## NER results"
DATASETS = ["resume", "weibo", "msra"]
MODELS = ["bilstm_crf", "transformer", "star", "lattice_lstm", "plte", "plte_sgd", "big", "bilstm_big",
          "bilstm_crf_vec", "lattice_lstm_vec", "plte_vec", "plte_sgd_vec", "big_vec", "bilstm_big_vec"]

# Test F1 reported by the papers (DESIGN §10 and the papers' tables); "BERT" marks numbers obtained
# on BERT representations, which we do not have (our models start from random embeddings).
PAPER = {
    ("resume", "plte"): "95.40 (PLTE Tab. 1)", ("msra", "plte"): "93.26 (PLTE Tab. 2)",
    ("weibo", "plte"): "55.15 (PLTE Tab. 2)",
    ("resume", "plte_sgd"): "95.40 (PLTE Tab. 1)", ("msra", "plte_sgd"): "93.26 (PLTE Tab. 2)",
    ("weibo", "plte_sgd"): "55.15 (PLTE Tab. 2)",
    ("resume", "lattice_lstm"): "94.46 (PLTE Tab. 1)", ("msra", "lattice_lstm"): "93.18 (PLTE Tab. 2)",
    ("weibo", "lattice_lstm"): "53.13 (PLTE Tab. 2; 58.79 later)",
    ("resume", "big"): "94.38 BERT (BiG Tab. IV)", ("msra", "big"): "96.41 BERT (BiG Tab. IV)",
    ("weibo", "big"): "68.56 BERT (BiG Tab. IV)",
    ("resume", "bilstm_big"): "94.38 BERT (BiG Tab. IV)", ("msra", "bilstm_big"): "96.41 BERT (BiG Tab. IV)",
    ("weibo", "bilstm_big"): "68.56 BERT (BiG Tab. IV)",
    ("resume", "transformer"): "92.70 BERT (BiG Tab. IV)", ("msra", "transformer"): "95.67 BERT (BiG Tab. IV)",
    ("weibo", "transformer"): "65.44 BERT (BiG Tab. IV)",
    ("resume", "star"): "93.45 BERT (BiG Tab. IV)", ("msra", "star"): "94.43 BERT (BiG Tab. IV)",
    ("weibo", "star"): "64.46 BERT (BiG Tab. IV)",
    ("resume", "bilstm_crf"): "91.87 (BiG Tab. IV, LSTM)", ("msra", "bilstm_crf"): "94.41 (BiG Tab. IV, LSTM)",
    ("weibo", "bilstm_crf"): "56.75 (BiG Tab. IV, LSTM)",
}


def spec_path(dataset: str, model: str) -> Path:
    return ROOT / "jsonnet_configs" / "ner" / f"{dataset}_{model}.jsonnet"


def prepared_spec(path: Path, epochs: int | None, max_instances: int | None, cuda_device: int | None,
                  vectors: str, overrides: list[str] = ()) -> tuple[dict, int]:
    """The spec with the command line's overrides, and the number of epochs the spec itself sets."""
    from multigrain.platform.specs import load_spec

    spec = load_spec(str(path), overrides, ext_vars={"vectors": vectors} if path.stem.endswith("_vec") else None)
    own_epochs = spec["trainer"]["num_epochs"]
    if epochs is not None:
        spec["trainer"]["num_epochs"] = epochs
    if cuda_device is not None:
        spec["trainer"]["cuda_device"] = cuda_device
    if max_instances is not None:
        for key in ("dataset_reader", "validation_dataset_reader", "test_dataset_reader"):
            if key in spec:
                spec[key]["max_instances"] = max_instances
    return spec, own_epochs


def pct(x) -> str:
    return f"{100 * x:.2f}" if isinstance(x, (int, float)) else "–"


def table(rows: dict) -> list[str]:
    lines = ["| dataset | model | dev F1 | test F1 | paper test F1 | epochs (best) | minutes | note |",
             "|---|---|---|---|---|---|---|---|"]
    order = {(d, m): (i, j) for i, d in enumerate(DATASETS) for j, m in enumerate(MODELS)}
    rank = lambda k: (*order.get(tuple(k.split("[")[0].split("_", 1)), (99, 99)), k)  # noqa: E731 tagged rows last
    for key in sorted(rows, key=rank):
        r = rows[key]
        lines.append(f"| {r['dataset']} | {r['model']} | {pct(r['dev_f1'])} | {pct(r['test_f1'])} | {r['paper']} | "
                     f"{r['epochs']} ({r['best_epoch']}) | {r['minutes']:.1f} | {r['note']} |")
    return lines


def seed_spread(rows: dict) -> list[str]:
    """Test F1 mean ± sample std of each spec run with several seeds: its ``[seedN]`` rows (``--tag seedN
    -o seed=N``), and its untagged row (the spec's own seed, 13) unless a ``[seed13]`` row replaces it."""
    groups: dict[str, dict[int, float]] = {}
    for key, r in rows.items():
        m = re.fullmatch(r"(.+)\[seed(\d+)\]", key)
        if m and isinstance(r.get("test_f1"), (int, float)):
            groups.setdefault(m.group(1), {})[int(m.group(2))] = r["test_f1"]
    lines = []
    for stem in sorted(groups):
        seeds = groups[stem]
        if 13 not in seeds and isinstance(rows.get(stem, {}).get("test_f1"), (int, float)):
            seeds[13] = rows[stem]["test_f1"]
        if len(seeds) < 2:
            continue
        values = [seeds[k] for k in sorted(seeds)]
        lines.append(f"- {stem}: test F1 {mean_std(values)} over seeds {', '.join(map(str, sorted(seeds)))} "
                     f"({', '.join(pct(v) for v in values)})")
    return ["", "Seed spread (rows tagged `seedN`, the spec's untagged row counting as seed 13 unless a `[seed13]` "
                "row re-ran it):", *lines] if lines else []


def main(argv=None) -> int:
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.training import describe_device, pick_device

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specs", nargs="*", default=None, help="spec stems, e.g. resume_plte weibo_big")
    parser.add_argument("--datasets", nargs="*", default=None, choices=DATASETS)
    parser.add_argument("--models", nargs="*", default=None, choices=MODELS)
    parser.add_argument("--epochs", type=int, default=None, help="override trainer.num_epochs")
    parser.add_argument("--max-instances", type=int, default=None, help="cut every split (smoke tests)")
    parser.add_argument("--cuda-device", type=int, default=None, help="-1 for CPU")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    parser.add_argument("--runs-dir", default="runs/ner")
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--vectors", default="runs/vectors",
                        help="directory of chars/bigrams/words.vec for the *_vec specs (trained by "
                             "benchmarks/pretrain_vectors.py when missing)")
    add_override_options(parser, "ner_results")
    args = parser.parse_args(argv)
    check_override_options(parser, args)

    stems = [f"{d}_{m}" for d in DATASETS for m in MODELS]
    unknown = sorted(set(args.specs or ()) - set(stems))
    if unknown:
        parser.error(f"--specs: unknown spec {', '.join(unknown)}; choose from {', '.join(stems)}")
    chosen = [(d, m) for d in DATASETS for m in MODELS
              if (args.specs is None or f"{d}_{m}" in args.specs)
              and (args.datasets is None or d in args.datasets) and (args.models is None or m in args.models)]

    if any(m.endswith("_vec") for _, m in chosen) and not all(
            (Path(args.vectors) / f"{ns}.vec").exists() for ns in ("chars", "bigrams", "words")):
        import pretrain_vectors

        pretrain_vectors.main(["--out", args.vectors])
    runs_dir = Path(args.runs_dir)
    store = Path(args.store)
    rows = save_row(store)
    for dataset, model in chosen:
        path = spec_path(dataset, model)
        spec, own_epochs = prepared_spec(path, args.epochs, args.max_instances, args.cuda_device, args.vectors,
                                         args.override)
        epochs = spec["trainer"]["num_epochs"]
        suffix = f"-max{args.max_instances}" if args.max_instances else ""
        tag = f"-{args.tag}" if args.tag else ""
        run_dir = runs_dir / f"{path.stem}{tag}-e{epochs}{suffix}-{spec_hash(spec)[:8]}"  # a changed spec trains anew
        started = time.time()
        result = results_md.train_or_reuse(spec, run_dir, args.tracking_uri, str(path))
        dev, test = result.get("validation") or {}, result.get("test") or {}
        notes = [f"smoke test: {args.max_instances} examples per split"] if args.max_instances else []
        if own_epochs != epochs:
            notes.append(f"--epochs {epochs} (spec: {own_epochs})")
        notes += [f"-o {o}" for o in args.override]
        note = "; ".join(notes)
        key = f"{path.stem}[{args.tag}]" if args.tag else path.stem
        row = {"dataset": dataset, "model": f"{model} [{args.tag}]" if args.tag else model, "dev_f1": dev.get("f1"), "test_f1": test.get("f1"),
               "paper": "–" if args.tag else PAPER.get((dataset, model.removesuffix("_vec")), "–"),
               "epochs": result.get("epochs_completed", epochs), "best_epoch": result.get("best_epoch", "–"),
               "minutes": result.get("seconds", time.time() - started) / 60, "note": note,
               "device": result.get("device") or describe_device(pick_device(None)),
               "date": time.strftime("%Y-%m-%d"), "run_dir": str(run_dir)}
        print(f"{key}: dev {json.dumps(dev)} test {json.dumps(test)}", flush=True)
        rows = save_row(store, key, row)

    devices = sorted({f"{r['device']} ({r['date']})" for r in rows.values()})
    body = ["", f"`python benchmarks/ner_results.py` (rows from {', '.join(devices) or '–'}); span-level micro F1 "
                "in percent, test F1 of the epoch with the best dev F1. No pretrained embeddings are available "
                "offline: models start from random character/bigram/word vectors, or (`*_vec`) from SGNS vectors "
                "trained by `benchmarks/pretrain_vectors.py` on the shared training text (4.8 M characters), whereas "
                "the papers used Giga-word word2vec (PLTE, Lattice LSTM) or BERT (BiG Tab. IV: BiG, Transformer, "
                "Star-Transformer), so compare our rows with each other. Settings and their sources: `jsonnet_configs/lib/ner_models.libsonnet`. "
                "MLflow experiments `ner/<dataset>`.", ""]
    write_section(SECTION, body + table(rows) + seed_spread(rows), Path(args.results))
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
