"""NER results: train every NER spec, log each run to MLflow (``ner/<dataset>``) as a row of the
``## NER results`` table of benchmarks/RESULTS.md (dev/test F1, epochs, minutes, the paper's number
beside ours), which is generated from MLflow (``results_tables.py``).

    python benchmarks/ner_results.py [--specs resume_plte weibo_big ...] [--datasets resume ...]
        [--models plte big ...] [--epochs N] [--max-instances N] [--results benchmarks/RESULTS.md]
        [--runs-dir runs/ner] [--board FILE] [--tracking-uri URI] [--cuda-device N] [-o KEY.PATH=VALUE ... --tag NAME]

Each spec is one tracked training (``multigrain.platform.runs.Run`` with a ``RunLogger``,
as ``multigrain train`` does) in ``<runs-dir>/<spec>-e<epochs>[-max<N>]-<spec hash[:8]>``; a finished run
directory is reused and an unfinished one resumed, so the script can be re-run after an
interruption; ``--epochs`` larger than an earlier run's starts from a copy of that run when the
schedule does not depend on the epoch count (``train_or_reuse``), and the row's minutes include
the earlier epochs. Rows of earlier invocations, of earlier sessions and of other machines stay in the
table: they are runs of the tracked portable leaderboard file ``benchmarks/results/leaderboard.json``
(``--board``), imported into the store first and exported back with this invocation's runs; a spec
trained again replaces its row. ``--max-instances`` cuts every split (a smoke test: the table says so;
give it its own ``--board`` and ``--tracking-uri``). ``-o`` overrides every chosen spec as
``multigrain train -o`` does, for ablations; ``--tag`` names the configuration, whose rows
(``big [no_global]``) sit under the spec's own and say the overrides:

    python benchmarks/ner_results.py --specs resume_bilstm_big --tag no_global -o model.encoder.encoders.1.global_node=false
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import results_md  # noqa: E402 benchmarks/ is on sys.path when run as a script
from results_md import add_override_options, check_override_options, open_results, tag_row
from results_tables import NER_DATASETS as DATASETS, NER_MODELS as MODELS, publish

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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
    client = open_results(args.tracking_uri, args.board)
    for dataset, model in chosen:
        path = spec_path(dataset, model)
        spec, own_epochs = prepared_spec(path, args.epochs, args.max_instances, args.cuda_device, args.vectors,
                                         args.override)
        epochs = spec["trainer"]["num_epochs"]
        suffix = f"-max{args.max_instances}" if args.max_instances else ""
        tag = f"-{args.tag}" if args.tag else ""
        run_dir = runs_dir / f"{path.stem}{tag}-e{epochs}{suffix}-{spec_hash(spec)[:8]}"  # a changed spec trains anew
        result = results_md.train_or_reuse(spec, run_dir, args.tracking_uri, str(path))
        notes = [f"smoke test: {args.max_instances} examples per split"] if args.max_instances else []
        if own_epochs != epochs:
            notes.append(f"--epochs {epochs} (spec: {own_epochs})")
        notes += [f"-o {o}" for o in args.override]
        key = f"{path.stem}[{args.tag}]" if args.tag else path.stem
        run_id = results_md.logged(result, spec, args.tracking_uri)
        tags = {"note": "; ".join(notes), "num_epochs": epochs, "spec_name": path.stem,
                "device": result.get("device") or describe_device(pick_device(None)), "date": time.strftime("%Y-%m-%d")}
        if args.tag:
            tags["config"] = args.tag
        tag_row(client, "ner", key, [run_id], {run_id: tags})
        print(f"{key}: dev {json.dumps(result.get('validation') or {})} test {json.dumps(result.get('test') or {})}",
              flush=True)
    publish(client, args.board, Path(args.results), args.max_instances)
    print(f"{args.results}: ## NER results written from {args.tracking_uri or 'mlruns.db'}; runs exported to {args.board}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
