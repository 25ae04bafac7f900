"""Sentence-task results: train every sentence spec with several seeds, write mean ± std.

    python benchmarks/sentence_results.py [--seeds 3] [--epochs N] [--only chnsenticorp_mwa ...]
        [-o KEY.PATH=VALUE ... --tag NAME] [--max-instances N] [--results benchmarks/RESULTS.md]
        [--runs-dir runs/sentence] [--store JSON] [--tracking-uri URI | --no-tracking]

Each (spec, seed) is one MLflow-tracked training (``multigrain.platform.runs.Run``) in its
own run directory; a finished run directory is reused, an unfinished one resumed, and a run
of the same spec with fewer epochs continued when the schedule allows (``train_or_reuse``). Every seed's
result is kept in the tracked store ``benchmarks/results/sentence_results.json`` (or ``--store``)
with its spec hash, so a later session adds seeds to a row without training the earlier ones
again (a changed spec trains anew). The table goes into the ``## Sentence results`` section of
the results file; the other sections are left as they are (the file is locked while it is
rewritten). ``--max-instances`` cuts every split (for a smoke test; say so when quoting numbers;
give it its own ``--store``).

``-o`` overrides every chosen spec as ``multigrain train -o`` does (the key must exist); ``--tag``
names such a configuration: its rows (``mwa [small]``) and run directories are its own, and the
overrides are listed under the table. For example the CPU-sized backbone of the comparisons:

    python benchmarks/sentence_results.py --only chnsenticorp_backbone chnsenticorp_mwa chnsenticorp_hrmf \
        --tag small -o model.embedder.num_layers=2 -o model.embedder.hidden_size=128 --epochs 5
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import results_md  # noqa: E402
from results_md import add_override_options, check_override_options, mean_std, save_row, write_section  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECTION = "## Sentence results"
DATASETS = [("cls", "chnsenticorp"), ("pair", "bq"), ("cls", "thucnews"), ("mrc", "cmrc2018")]
# m3e_*: the same layers on the pretrained m3e-small backbone (optional extra multigrain[m3e])
VARIANTS = ["backbone", "mwa", "hrmf", "big", "big_vec", "m3e_backbone", "m3e_mwa", "m3e_hrmf", "m3e_big", "big_m3e_vec"]


def spec_paths() -> list[Path]:
    """The sentence specs that exist, in table order (not every dataset has every variant)."""
    paths = [ROOT / "jsonnet_configs" / task / f"{name}_{variant}.jsonnet"
             for task, name in DATASETS for variant in VARIANTS]
    return [p for p in paths if p.is_file()]


def prepared_spec(path: Path, seed: int, epochs: int | None, max_instances: int | None,
                  vectors: str = "runs/vectors", overrides: list[str] = ()) -> dict:
    from multigrain.platform.specs import load_spec

    spec = load_spec(path, overrides, ext_vars={"vectors": vectors} if path.stem.endswith("_vec") else None)
    spec["seed"] = seed
    if epochs is not None:
        spec["trainer"]["num_epochs"] = epochs
    if max_instances is not None:
        for key in ("dataset_reader", "validation_dataset_reader"):
            if key in spec:
                spec[key]["max_instances"] = max_instances
    return spec


def run_dir_for(path: Path, spec: dict, runs_dir: str, tag: str | None = None, max_instances: int | None = None) -> Path:
    """``<runs_dir>/<stem>[-tag]-e<epochs>[-max<N>]-seed<S>-<hash8>``: one directory per (spec, seed)."""
    from multigrain.platform.specs import spec_hash

    suffix = f"-max{max_instances}" if max_instances else ""
    tag = f"-{tag}" if tag else ""
    return Path(runs_dir) / (f"{path.stem}{tag}-e{spec['trainer']['num_epochs']}{suffix}-seed{spec['seed']}-"
                             f"{spec_hash(spec)[:8]}")


def cells(row: dict) -> tuple[str, str, str, int, float]:
    """(test a, test b, dev, seeds, minutes per run) of a row: from its per-seed results, or, for a
    row imported from an earlier RESULTS.md whose per-seed values were not kept, its ``summary``."""
    if "summary" in row:
        s = row["summary"]
        return s["test_a"], s["test_b"], s["dev"], s["seeds"], s["minutes"]
    runs = [row["runs"][seed] for seed in sorted(row["runs"], key=int)]
    pick = lambda name: [r[name] for r in runs if r.get(name) is not None]  # noqa: E731
    return (mean_std(pick("test_a")), mean_std(pick("test_b")), mean_std(pick("dev")), len(runs),
            statistics.fmean(pick("seconds") or [0.0]) / 60)


def table(rows: list[dict]) -> list[str]:
    lines = ["| experiment | model | test acc / EM | test macro-F1 / F1 | dev acc / F1 | seeds | epochs | min/run |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        model = f"{r['variant']} [{r['tag']}]" if r.get("tag") else r["variant"]
        test_a, test_b, dev, seeds, minutes = cells(r)
        lines.append(f"| {r['experiment']} | {model} | {test_a} | {test_b} | {dev} | {seeds} | {r['epochs']} | "
                     f"{minutes:.1f} |")
    tags = {r["tag"]: r["overrides"] for r in rows if r.get("tag")}
    if tags:
        lines.append("")
        lines += [f"- `[{tag}]`: " + " ".join(f"`-o {o}`" for o in overrides) for tag, overrides in sorted(tags.items())]
    return lines


def sources(rows: list[dict]) -> list[str]:
    """The devices and dates the rows' runs were measured on."""
    found = set()
    for r in rows:
        for run in [r["summary"]] if "summary" in r else r["runs"].values():
            found.add(f"{run['device']} ({run['date']})")
    return sorted(found)


def main(argv=None) -> int:
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.training import describe_device, pick_device

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=None, help="override trainer.num_epochs")
    parser.add_argument("--only", nargs="*", default=None, help="spec stems, e.g. chnsenticorp_mwa")
    parser.add_argument("--max-instances", type=int, default=None, help="cut every split (smoke tests)")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    parser.add_argument("--runs-dir", default="runs/sentence")
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--no-tracking", action="store_true",
                        help="train without MLflow (a machine without the store); `multigrain log RUN_DIR` logs them later")
    parser.add_argument("--vectors", default="runs/vectors", help="directory of chars.vec for the *_vec specs")
    add_override_options(parser, "sentence_results")
    args = parser.parse_args(argv)
    check_override_options(parser, args)

    stems = [p.stem for p in spec_paths()]
    unknown = sorted(set(args.only or ()) - set(stems))
    if unknown:
        parser.error(f"--only: unknown spec {', '.join(unknown)}; choose from {', '.join(stems)}")
    paths = [p for p in spec_paths() if args.only is None or p.stem in args.only]
    store = Path(args.store)
    for path in paths:
        task, (_, variant) = path.parent.name, path.stem.split("_", 1)
        key = f"{path.stem}[{args.tag}]" if args.tag else path.stem
        kept = save_row(store).get(key, {}).get("runs", {})
        row = {"experiment": "", "variant": variant, "epochs": "", "tag": args.tag, "overrides": args.override,
               "runs": {}}
        # the seeds asked for, and those an earlier invocation added to this row (kept if still this spec)
        for seed in sorted({13 + k for k in range(args.seeds)} | {int(s) for s in kept}):
            spec = prepared_spec(path, seed, args.epochs, args.max_instances, args.vectors, args.override)
            digest = spec_hash(spec)
            row.update(experiment=f"{spec['task']}/{spec['dataset']}", epochs=spec["trainer"]["num_epochs"])
            if kept.get(str(seed), {}).get("spec_hash") == digest:
                row["runs"][str(seed)] = kept[str(seed)]
                print(f"{key} seed {seed}: kept from {store}", flush=True)
                continue
            if seed >= 13 + args.seeds:
                print(f"{key} seed {seed}: dropped from {store} (trained with another spec)", flush=True)
                continue
            run_dir = run_dir_for(path, spec, args.runs_dir, args.tag, args.max_instances)
            started = time.time()
            result = results_md.train_or_reuse(spec, run_dir, args.tracking_uri, str(path), track=not args.no_tracking)
            test, dev = result.get("test") or {}, result.get("validation") or {}
            a, b = ("em", "f1") if task == "mrc" else ("accuracy", "macro_f1")
            row["runs"][str(seed)] = {
                "test_a": test.get(a), "test_b": test.get(b), "dev": dev.get("f1" if task == "mrc" else "accuracy"),
                "seconds": result.get("seconds", time.time() - started), "best_epoch": result.get("best_epoch"),
                "spec_hash": digest, "device": result.get("device") or describe_device(pick_device(None)),
                "date": time.strftime("%Y-%m-%d")}
            print(f"{key} seed {seed}: test {json.dumps(test)}", flush=True)
        save_row(store, key, row)
    order = {p.stem: i for i, p in enumerate(spec_paths())}
    datasets = {f"{task}/{name}": i for i, (task, name) in enumerate(DATASETS)}
    rank = lambda kv: (datasets.get(kv[1]["experiment"], len(datasets)), kv[1].get("tag") or "",  # noqa: E731
                       order.get(kv[0].split("[")[0], len(order)))
    rows = [r for _, r in sorted(save_row(store).items(), key=rank)]

    note = [
        "",
        f"`python benchmarks/sentence_results.py` (rows from {', '.join(sources(rows)) or '–'}). Mean ± std "
        "over the seeds run (13, 14, ...; the seeds column), in percent; each row's epochs column is its "
        "trainer.num_epochs. Backbones: `m3e_*` rows fine-tune m3e-small (a pretrained 4-layer, 512-d Chinese "
        "RoBERTa; optional extra `multigrain[m3e]`); the others a randomly initialised char_transformer, so "
        "their absolute numbers are far below the papers' BERT-based ones: compare rows on the same backbone. "
        "MWA on classification and pairs pools keys (the released code): with the paper's query pooling "
        "([small-query] rows) the [CLS] row the classifier reads is never word-aligned, so those rows measure "
        "an extra attention layer, not the word alignment. `big_vec`: `big` with 50-d SGNS character vectors from "
        "`benchmarks/pretrain_vectors.py`. `m3e_big`: BiG's two bipartite layers over m3e-small's character states "
        "(the paper's BiG-Transformer (BERT) setting, 94.92; its word2vec setting, 89.50, is `big_vec`); `big_m3e_vec`: `big_vec` with m3e-small's static 512-d input embeddings "
        "(`benchmarks/export_m3e_vectors.py`) for the SGNS vectors (its seed 15 ran alone on 2 threads after epoch 1). ChnSentiCorp `big`/`big_vec`: the BiG paper's Table I word2vec settings (batch 128, "
        "rate 7e-4) for 40 epochs with patience 5, chosen by dev accuracy over the tagged rows beside them; `[ema-e20]`: the same "
        "for the paper's 20 epochs with `trainer.moving_average` 0.995 (validation, best.pt and test use an exponential "
        "moving average of the weights; its first 3 seeds gave 90.17, seeds 16-19 were run to check it; all on a CPU, 1 thread each but seed 16 on 2); `[ema-e20-h6]`: that with the paper's 6 heads (240-d model; 4 seeds, 2 threads each, one at a time, but seed 16 on 1 thread for its first 3 epochs); `[ema-e20-h6-v300]`: that with 300-d SGNS character vectors (`pretrain_vectors.py --dim 300 --namespaces chars --out runs/vectors300`, rows written with `--vectors runs/vectors300`; 3 seeds at once, 1 thread each; all three stopped early, patience 5); `[ema-e20-h6-bigram]`: `[ema-e20-h6]` with 50-d SGNS bigram vectors beside the character ones (`char_bigram` bigram_dim 50, `runs/vectors/bigrams.vec`; the BiG paper names only character vectors; its first 3 seeds gave 90.67, seed 16 was run to check it; 2 threads each, one at a time, seed 15 stopped after epoch 3 and resumed from its last.pt in a later session: about 4.3 min per epoch, against 1.5 for `[ema-e20-h6]` on an earlier session's machine). Rows trained on "
        "a GPU ran 3-12 trainings at once on it, so their min/run is a shared GPU's time. THUCNews test = the 10% hash bucket of test.txt; "
        "CMRC 2018 test = the trial set (the official test set is hidden).",
        "",
    ]
    if args.max_instances:
        note.insert(2, f"**Smoke test: every split cut to {args.max_instances} examples; not a result.**")
    write_section(SECTION, note + table(rows), Path(args.results))
    print("\n".join(table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
