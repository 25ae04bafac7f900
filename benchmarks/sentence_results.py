"""Sentence-task results: train every sentence spec with several seeds; the ``## Sentence results``
table of benchmarks/RESULTS.md (mean ± std over the seeds) is generated from MLflow (``results_tables.py``).

    python benchmarks/sentence_results.py [--seeds 3] [--epochs N] [--only chnsenticorp_mwa ...]
        [-o KEY.PATH=VALUE ... --tag NAME] [--max-instances N] [--results benchmarks/RESULTS.md]
        [--runs-dir runs/sentence] [--board FILE] [--tracking-uri URI]

Each (spec, seed) is one MLflow-tracked training (``multigrain.platform.runs.Run``) in its
own run directory; a finished run directory is reused, an unfinished one resumed, and a run
of the same spec with fewer epochs continued when the schedule allows (``train_or_reuse``). Every seed's
run is kept in the store and in the tracked portable leaderboard file ``benchmarks/results/leaderboard.json``
(``--board``: imported first, exported back) with its spec hash, so a later session, or another machine
whose file is merged (``multigrain leaderboard --import``), adds seeds to a row without training the
earlier ones again (a changed spec trains anew). The table goes into the ``## Sentence results`` section
of the results file; the other sections are left as they are (the file is locked while it is
rewritten). ``--max-instances`` cuts every split (for a smoke test; say so when quoting numbers;
give it its own ``--board`` and ``--tracking-uri``).

``-o`` overrides every chosen spec as ``multigrain train -o`` does (the key must exist); ``--tag``
names such a configuration: its rows (``mwa [small]``) and run directories are its own, and the
overrides are listed under the table. For example the CPU-sized backbone of the comparisons:

    python benchmarks/sentence_results.py --only chnsenticorp_backbone chnsenticorp_mwa chnsenticorp_hrmf \
        --tag small -o model.embedder.num_layers=2 -o model.embedder.hidden_size=128 --epochs 5
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import results_md  # noqa: E402 benchmarks/ is on sys.path when run as a script
from results_md import add_override_options, check_override_options, open_results, tag_row
from results_tables import sentence_spec_paths as spec_paths, publish

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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
    parser.add_argument("--vectors", default="runs/vectors", help="directory of chars.vec for the *_vec specs")
    add_override_options(parser, "sentence_results")
    args = parser.parse_args(argv)
    check_override_options(parser, args)

    stems = [p.stem for p in spec_paths()]
    unknown = sorted(set(args.only or ()) - set(stems))
    if unknown:
        parser.error(f"--only: unknown spec {', '.join(unknown)}; choose from {', '.join(stems)}")
    paths = [p for p in spec_paths() if args.only is None or p.stem in args.only]
    client = open_results(args.tracking_uri, args.board)
    from multigrain.platform.records import records

    stored = records(client, filter_string="attributes.status = 'FINISHED' and tags.results_table = 'sentence'")
    for path in paths:
        key = f"{path.stem}[{args.tag}]" if args.tag else path.stem
        kept: dict[int, dict[str, dict]] = {}  # seed -> spec hash -> the latest stored run of this row
        for rec in stored:
            if rec["tags"].get("results_key") == key and rec["tags"].get("seed"):
                kept.setdefault(int(rec["tags"]["seed"]), {})[rec["tags"].get("spec_hash", "")] = rec
        run_ids, tags = [], {}
        # the seeds asked for, and those an earlier invocation added to this row (kept if still this spec)
        for seed in sorted({13 + k for k in range(args.seeds)} | set(kept)):
            spec = prepared_spec(path, seed, args.epochs, args.max_instances, args.vectors, args.override)
            digest = spec_hash(spec)
            if digest in kept.get(seed, {}):
                run_ids.append(kept[seed][digest]["run_id"])
                print(f"{key} seed {seed}: kept from {args.board}", flush=True)
                continue
            if seed >= 13 + args.seeds:
                print(f"{key} seed {seed}: dropped (trained with another spec)", flush=True)
                continue
            run_dir = run_dir_for(path, spec, args.runs_dir, args.tag, args.max_instances)
            result = results_md.train_or_reuse(spec, run_dir, args.tracking_uri, str(path))
            run_id = results_md.logged(result, spec, args.tracking_uri)
            run_ids.append(run_id)
            tags[run_id] = {"device": result.get("device") or describe_device(pick_device(None)),
                            "date": time.strftime("%Y-%m-%d"), "seed": seed}
            print(f"{key} seed {seed}: test {json.dumps(result.get('test') or {})}", flush=True)
        row = {"spec_name": path.stem, "num_epochs": spec["trainer"]["num_epochs"],
               "overrides": json.dumps(args.override, ensure_ascii=False), **({"config": args.tag} if args.tag else {})}
        tag_row(client, "sentence", key, run_ids, {r: {**row, **tags.get(r, {})} for r in run_ids})
    publish(client, args.board, Path(args.results), args.max_instances)
    print(f"{args.results}: ## Sentence results written; runs exported to {args.board}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
