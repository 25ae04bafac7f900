"""Translation (zh->en) tables: Transformer encoder vs BiG-Transformer encoder, the same
``nmt_decoder``, sizes, data, batches and epochs (``jsonnet_configs/mt/tvsub_{transformer,big}[_small].jsonnet``),
several seeds; BLEU on every test set of the runs (tvsub: 3 references, wmt22: 2, wmt18/19/20, the
Tatoeba test split), model sizes and training time. It trains nothing.

    python benchmarks/mt_results.py --suite jsonnet_configs/suites/mt.jsonnet [--config TAG] [--variant cpu|gpu]
        [--size small|base] [--only transformer big] [-o KEY.PATH=VALUE ...] [--runs-dir runs]
        [--results benchmarks/RESULTS.md] [--out benchmarks/results/translation.json] [--section HEADING]
    python benchmarks/mt_results.py --combine A.json B.json ... [--results ...] [--out ...] [--section ...]

The runs are the suite ``jsonnet_configs/suites/mt.jsonnet``'s: ``multigrain suite`` trains them
(Ray, reused and resumed runs, MLflow), and ``--suite`` makes the table of its finished runs of one
size and recipe: ``--size base`` (``tvsub_*.jsonnet``, Transformer base: 6+6 layers of 512, for a
GPU) or ``small`` (``tvsub_*_small.jsonnet``, 3+3 layers of 256, for a CPU budget); ``--variant V``
the ``tvsub_*_<size>_V.jsonnet`` entries instead (``cpu``: issue 40's 40-minute CPU recipe; ``gpu``:
its device call, every pair in token batches, bf16); ``--config TAG`` the runs of the entries'
configuration ``TAG`` (``tvsub_*_small [160k-e1]``: ``--config 160k-e1``; default the untagged
runs); ``-o``: the suite call's overrides (part of its runs' hashes), as ``device_session.sh mt``
gives both. A run not finished in its directory is left out; parameters are counted from each
run's archive. The per-run figures go to ``--out`` (JSON) and the table, with a ``Suite:`` line
naming the suite call whose runs it shows, to the ``## Translation (zh→en)`` section of
``--results`` (or ``--section``; the other sections are left as they are).

``--combine`` makes one table of the runs of several ``--out`` files (of the same size, epochs,
batch and pairs; earlier files of this script's former own trainings included: their smoke-test cuts
and their sets scored after training are named under the table). A finished run is scored on one of
its spec's test sets again by ``multigrain evaluate RUN --test-set NAME``.

``prepared_spec`` and ``tiny_tatoeba_spec`` (a shipped spec cut to a check's budget) are
``cuda_checks.py``'s trainings.
"""
from __future__ import annotations

import argparse
import copy
import json
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
                  max_train_pairs: int | None = None, test_sets: tuple[str, ...] = TEST_SETS,
                  variant: str | None = None) -> dict:
    """The shipped spec of ``encoder`` at ``size`` (and ``variant``) with a check's seed and budget
    cuts (``cuda_checks.py``'s plan_mt), and only the ``test_sets`` named (of those the spec has).
    A training cut leaves the validation set whole: its own reader, uncut."""
    from multigrain.platform.specs import load_spec

    spec = load_spec(spec_path(encoder, size, variant))
    spec["seed"] = seed
    if epochs is not None:
        spec["trainer"]["num_epochs"] = epochs
    if max_train_pairs is not None:
        spec["validation_dataset_reader"] = copy.deepcopy(spec["dataset_reader"])
        spec["validation_dataset_reader"].pop("max_instances", None)
        spec["dataset_reader"]["max_instances"] = max_train_pairs
    spec["test_sets"] = {name: entry for name, entry in spec["test_sets"].items() if name in test_sets}
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


def count_parameters(spec: dict, run_dir: Path) -> int:
    """Trainable parameters of the run's model, built on the CPU from its spec and its saved
    vocabulary and resources; no weights are read, so a run a device call brought back without its
    checkpoints (``results.tar.gz``) is counted as well."""
    from multigrain.platform.run_archive import built_model
    from multigrain.platform.runs import Run

    model, _ = built_model(Run(spec, run_dir, check_data_paths=False))
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
    # the runs of --out files of this script's former own trainings (--combine): sets they scored after
    # training, and smoke tests' cuts
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
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--suite", metavar="SUITE",
                      help="the table of this suite's finished runs (multigrain suite "
                           "jsonnet_configs/suites/mt.jsonnet trained them); --only picks encoders")
    what.add_argument("--combine", nargs="+", metavar="JSON",
                      help="the table of the runs in earlier --out files (parts made apart)")
    parser.add_argument("--size", choices=("small", "base"), default="small", help="with --suite")
    parser.add_argument("--variant", choices=("cpu", "gpu"), default=None,
                        help="with --suite: the tvsub_*_<size>_<variant>.jsonnet entries, issue 40's recipes "
                             "(cpu: 40 minutes of one core; gpu: the device call's)")
    parser.add_argument("--config", metavar="TAG", help="with --suite: the runs of the entries' configuration TAG "
                                                        "(tvsub_*_small [160k-e1]: --config 160k-e1); default: untagged")
    parser.add_argument("--only", nargs="+", choices=ENCODERS, default=list(ENCODERS), help="with --suite")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="with --suite: the suite call's -o (its runs' hashes include them)")
    parser.add_argument("--runs-dir", default="runs", help="with --suite: its run directories' root (default runs/)")
    parser.add_argument("--results", default=str(results_md.RESULTS))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "translation.json"))
    parser.add_argument("--section", default=SECTION, help="the RESULTS.md heading the table is written under")
    args = parser.parse_args(argv)
    if args.combine:
        suite_only = [flag for flag, given in (("--size", args.size != "small"), ("--variant", args.variant),
                                               ("--config", args.config), ("-o", args.override),
                                               ("--only", args.only != list(ENCODERS)),
                                               ("--runs-dir", args.runs_dir != "runs")) if given]
        if suite_only:
            parser.error(f"{', '.join(suite_only)}: with --suite only (--combine takes the runs of its files)")
        return combine([Path(p) for p in args.combine], Path(args.out), Path(args.results), args.section)
    return from_suite(args, argv)


def settings_of(spec: dict, size: str, seeds, argv) -> dict:
    """The table's settings line: what the runs of ``spec`` (one of them) share, and how they were made."""
    cut = spec["dataset_reader"].get("max_instances")
    loader = spec["data_loader"]
    return {"size": size, "epochs": spec["trainer"]["num_epochs"],
            "batch_size": loader["batch_size"] if "max_tokens" not in loader else
            f"at most {loader['max_tokens']:,} tokens (source + target)",
            "train_pairs": f"{cut:,}" if cut else f"all {TVSUB_TRAIN_PAIRS:,}",
            "seeds": ", ".join(str(s) for s in sorted(set(seeds))), "date": time.strftime("%Y-%m-%d"),
            "argv": " ".join(argv if argv is not None else sys.argv[1:])}


def from_suite(args, argv) -> int:
    """The table of a suite's finished translation runs of ``--size``/``--variant``/``--config`` and the
    suite call's ``-o`` (``multigrain suite`` trained them): nothing is trained; parameters are counted
    from each run's archive."""
    from multigrain.platform.experiment import identity
    from multigrain.platform.suite import load_suite, plan

    def stem(encoder: str) -> str:
        return spec_path(encoder, args.size, args.variant).stem

    # the entries' names the Suite: line gives (exactly this table's runs); only they are planned, with
    # the suite call's -o (a cut such as +dataset_reader.max_instances need not apply to the others)
    only = stem(args.only[0] if len(args.only) == 1 else "*") + (f" [{args.config}]" if args.config else "")
    runs = [r for r in plan(args.suite, load_suite(args.suite), args.runs_dir, only=only, check_data_paths=False,
                            overrides=args.override)
            if Path(r.spec_path).stem in {stem(e) for e in args.only} and r.tag == (args.config or "")]
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
    # the Suite: line names every part's suite call, or none where a part's runs were not a suite's
    suites = [data["settings"].get("suite") for data in loaded]
    settings.pop("suite", None)
    if all(suites):
        settings["suite"] = "` and `".join(dict.fromkeys(suites))
    write_results(rows, settings, out, results, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
