"""``multigrain`` command line. Heavy libraries are imported inside each command."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

QUICKSTART_SPECS = ["jsonnet_configs/ner/resume_quickstart.jsonnet"]


def _load(args):
    from multigrain.platform.commands.common import load_spec_args

    return load_spec_args(args)


def default_run_dir(spec_path: str, digest: str) -> Path:
    return Path("runs") / f"{Path(spec_path).stem}-{digest[:8]}"


# ---------------------------------------------------------------------------- commands
def cmd_train(args) -> int:
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.experiment import validate_spec
    from multigrain.platform.tracking import RunLogger

    spec = _load(args)
    validate_spec(spec, args.spec)
    digest = spec_hash(spec)
    run_dir = Path(args.serialization_dir) if args.serialization_dir else default_run_dir(args.spec, digest)
    logger = None if args.no_tracking else RunLogger(args.tracking_uri)
    result = run_tracked(spec, run_dir, logger, resume=args.resume, stop_after_epoch=args.stop_after_epoch,
                         source=args.spec)
    _print_result(result)
    return 0


def run_tracked(spec: dict, run_dir: Path, logger, resume: bool = False, stop_after_epoch=None, source=None) -> dict:
    """Train with live MLflow logging (when a logger is given)."""
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.experiment import identity, train_experiment, validate_spec

    validate_spec(spec, source)
    if logger is None:
        return train_experiment(spec, run_dir, resume=resume, stop_after_epoch=stop_after_epoch, source=source)
    started = []

    def on_epoch(epoch, record):
        if not started:
            logger.start(spec, identity(spec), spec_hash(spec), str(run_dir))
            started.append(True)
        logger.log_epoch(epoch, record)

    try:
        result = train_experiment(spec, run_dir, resume=resume, stop_after_epoch=stop_after_epoch,
                                  on_epoch=on_epoch, source=source)
    except BaseException:
        logger.fail()
        raise
    if not started:
        logger.start(spec, identity(spec), spec_hash(spec), str(run_dir))
    if result.get("finished"):
        logger.finish(result, str(run_dir))
    else:
        logger.client.set_terminated(logger.run_id, "KILLED")
    return result


def train_or_reuse(spec: dict, run_dir: Path, tracking_uri: "str | None" = None, source=None,
                   track: bool = True) -> dict:
    """The metrics of a finished run in ``run_dir``, else train there (resuming from its
    ``last.pt`` when an earlier attempt was interrupted), logging to MLflow unless ``track`` is
    false (a machine without the tracking store; ``multigrain log`` logs the run dir later).

    A new ``run_dir`` starts from a copy of the longest sibling run that the spec extends (the
    same spec with fewer ``trainer.num_epochs`` and a schedule that does not depend on them), so
    asking a results script for more epochs trains only the missing ones; the sibling is kept."""
    import shutil

    from multigrain.platform.specs import spec_hash
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.experiment import shorter_run
    from multigrain.platform.tracking import RunLogger

    run_dir, digest = Path(run_dir), spec_hash(spec)
    metrics = run_dir / "metrics.json"
    if metrics.exists():
        done = json.loads(metrics.read_text(encoding="utf-8"))
        if done.get("finished"):
            if done.get("spec_hash") != digest:
                raise ConfigurationError(f"{run_dir}: holds a finished run of another spec (hash "
                                         f"{str(done.get('spec_hash'))[:12]}, not {digest[:12]}); "
                                         f"choose another run directory")
            return done
    if not (run_dir / "last.pt").exists() and not (run_dir.exists() and any(run_dir.iterdir())):
        earlier = shorter_run(spec, run_dir.parent)
        if earlier is not None:
            print(f"{run_dir}: continuing {earlier} (the same spec with fewer epochs)", flush=True)
            tmp = run_dir.with_name(run_dir.name + ".copying")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(earlier, tmp, ignore=shutil.ignore_patterns("metrics.json"))
            if run_dir.exists():
                run_dir.rmdir()
            tmp.rename(run_dir)
    resume = (run_dir / "last.pt").exists()
    return run_tracked(spec, run_dir, RunLogger(tracking_uri) if track else None, resume=resume, source=source)


def _print_result(result: dict) -> None:
    keep = {k: result.get(k) for k in ("spec_hash", "run_dir", "finished", "best_epoch", "epochs_completed",
                                       "validation", "test", "seconds")}
    print(json.dumps(keep, indent=2, ensure_ascii=False, default=float))


def cmd_evaluate(args) -> int:
    from multigrain.platform.archive import load_archive
    from multigrain.platform.experiment import batches_for
    from multigrain.platform.training import evaluate

    archive = load_archive(args.archive, device=args.device)
    instances = archive.read(args.data)
    exp_loader = __import__("multigrain.platform.batching", fromlist=["DataLoaderConfig"]).DataLoaderConfig(
        batch_size=args.batch_size)
    metrics = evaluate(archive.model, batches_for(archive.model, instances, exp_loader, 0, False), archive.device)
    text = json.dumps(metrics, indent=2)
    if args.output_file:
        Path(args.output_file).write_text(text + "\n")
    print(text)
    return 0


def read_jsonl(path: str, model) -> list:
    from multigrain.platform.errors import DataError

    out = []
    with open(path, encoding="utf-8") as f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(path, n, f"bad JSON: {e.msg} (column {e.colno})") from None
                if not isinstance(data, dict):
                    raise DataError(path, n, "expected a JSON object per line")
                try:
                    inst = model.text_to_instance(data)
                except (KeyError, ValueError) as e:
                    raise DataError(path, n, f"cannot make an example: {e}") from None
                inst.source = (path, n)
                out.append(inst)
        except UnicodeDecodeError as e:
            raise DataError(path, None, f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
    return out


def cmd_predict(args) -> int:
    from multigrain.platform.archive import load_archive

    archive = load_archive(args.archive, device=args.device)
    if args.input.endswith((".jsonl", ".json")) and not args.use_dataset_reader:
        instances = archive.reader.annotate(read_jsonl(args.input, archive.model))
    else:
        instances = archive.read(args.input)
    out = open(args.output_file, "w", encoding="utf-8") if args.output_file else sys.stdout
    try:
        for pred in archive.predict_batches(instances, args.batch_size):
            out.write(json.dumps(pred, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def cmd_validate(args) -> int:
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.experiment import validate_spec

    spec = _load(args)
    validate_spec(spec, args.spec)
    print(f"{args.spec}: valid (spec hash {spec_hash(spec)})")
    return 0


def cmd_components(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from multigrain.platform.registry import KINDS, kind_of, load_all

    load_all()
    kinds = [args.kind] if args.kind else sorted(KINDS)
    table = Table(title="registered components")
    for col in ("kind", "name", "class", "defined in"):
        table.add_column(col)
    for kind in kinds:
        base = kind_of(kind)
        for name, entry in sorted(base.registry().items()):
            cls_name = f"{entry.cls.__module__}.{entry.cls.__qualname__}"
            where = entry.where.split(" (", 1)[-1].rstrip(")") if "(" in entry.where else ""
            table.add_row(kind, name, cls_name, where)
    Console(width=200).print(table)
    return 0


def cmd_log(args) -> int:
    """Log finished run directories trained without tracking (``--no-tracking``, another machine)."""
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.tracking import logged_run, replay

    runs = []
    for path in map(Path, args.run_dirs):
        files = [path / "metrics.json", path / "config.json"]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise ConfigurationError(f"{path}: not a run directory (missing {', '.join(missing)})")
        try:
            result, spec = [json.loads(f.read_text(encoding="utf-8")) for f in files]
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigurationError(f"{path}: unreadable run files ({e})") from None
        if not result.get("finished"):
            raise ConfigurationError(f"{path}: the run is not finished (resume it with multigrain train --resume)")
        runs.append((path, dict(result, run_dir=str(path)), spec))
    for path, result, spec in runs:  # every directory checked before anything is logged
        known = logged_run(result, args.tracking_uri)
        if known:
            print(f"{path}: already logged as MLflow run {known}; skipped")
            continue
        run_id = replay(result, spec, args.tracking_uri)
        print(f"{path}: logged as MLflow run {run_id} ({result['task']}/{result['dataset']}, test {result.get('test')})")
    return 0


def cmd_leaderboard(args) -> int:
    from multigrain.platform.tracking import leaderboard, print_leaderboard

    rows = leaderboard(args.task, args.tracking_uri, args.metric)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        print_leaderboard(args.task, rows)
    return 0


def cmd_quickstart(args) -> int:
    """``make run``: train the quickstart spec(s) (once per spec hash) and print the leaderboard."""
    from multigrain.platform.specs import load_spec, spec_hash
    from multigrain.platform.experiment import identity
    from multigrain.platform.tracking import RunLogger, experiment_name, leaderboard, print_leaderboard

    boards = []
    for path in args.specs or QUICKSTART_SPECS:
        spec = load_spec(path, args.override)
        digest = spec_hash(spec)
        run_dir = default_run_dir(path, digest)
        metrics = run_dir / "metrics.json"
        if metrics.exists() and json.loads(metrics.read_text()).get("finished"):
            print(f"{path}: already trained in {run_dir} (spec hash {digest[:12]}); "
                  f"delete that directory to train again")
        else:
            if run_dir.exists():
                import shutil

                shutil.rmtree(run_dir)  # an interrupted quickstart starts over
            print(f"training {path} -> {run_dir}", flush=True)
            result = run_tracked(spec, run_dir, RunLogger(args.tracking_uri), source=path)
            _print_result(result)
        boards.append(experiment_name(identity(spec)))
    for board in dict.fromkeys(boards):
        print_leaderboard(board, leaderboard(board, args.tracking_uri))
    return 0


# ---------------------------------------------------------------------------- parser
def _spec_args(p):
    p.add_argument("spec", help="a Jsonnet or JSON spec")
    p.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one spec value (JSON, or a bare string); the key must exist")
    p.add_argument("--ext-var", action="append", default=[], metavar="NAME=VALUE",
                   help="a Jsonnet external variable (only these are visible to the spec)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="multigrain",
                                     description="Chinese multi-granularity NLP: train, evaluate and rank "
                                                 "lattice models from Jsonnet specs.")
    parser.add_argument("--include-package", action="append", default=[], metavar="MODULE",
                        help="import a local module that registers components")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("train", help="train a model from a spec")
    _spec_args(p)
    p.add_argument("-s", "--serialization-dir", help="run directory (default runs/<spec>-<hash8>)")
    p.add_argument("--resume", action="store_true", help="continue the run in -s bit-identically; with a larger trainer.num_epochs "
                   "(and nothing else changed) extend it, when the schedule does not depend on num_epochs")
    p.add_argument("--stop-after-epoch", type=int, help="stop after this many epochs (resume later)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///mlruns.db)")
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="evaluate an archive (run directory) on a data file")
    p.add_argument("archive")
    p.add_argument("data")
    p.add_argument("--output-file")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("predict", help="predict with an archive; JSON lines out")
    p.add_argument("archive")
    p.add_argument("input", help='JSON lines ({"text": ...}) or a data file in the reader\'s format')
    p.add_argument("--output-file")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--use-dataset-reader", action="store_true")
    p.add_argument("--device")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("validate", help="check a spec and report every error; builds nothing")
    _spec_args(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("components", help="list registered components")
    p.add_argument("kind", nargs="?", help="one registry kind (encoder, head, reader, ...)")
    p.set_defaults(func=cmd_components)

    p = sub.add_parser("log", help="log finished run directories trained with --no-tracking to MLflow")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=cmd_log)

    p = sub.add_parser("leaderboard", help="rank the runs of a task from MLflow")
    p.add_argument("task", help="an experiment such as ner/resume, or a task such as ner")
    p.add_argument("--metric", help="metric key (default: each run's leaderboard metric)")
    p.add_argument("--tracking-uri")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("quickstart", help="train the quickstart spec(s) and print the leaderboard (make run)")
    p.add_argument("specs", nargs="*")
    p.add_argument("-o", "--override", action="append", default=[])
    p.add_argument("--tracking-uri")
    p.set_defaults(func=cmd_quickstart)

    for register in _extra_commands():
        register(sub)
    return parser


def _extra_commands():
    """The ``register`` functions of the Ray commands (one module each under ``commands/``); those
    modules import only argparse, so adding them imports no Ray."""
    from multigrain.platform.commands import evaluate_all, jobs, serve, submit, sweep

    return [sweep.register, serve.register, evaluate_all.register, submit.register, jobs.register]


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    from multigrain.platform.errors import MultigrainError

    try:
        if args.include_package:
            from multigrain.platform.registry import import_package

            for name in args.include_package:
                sys.path.insert(0, os.getcwd())
                import_package(name)
        return args.func(args) or 0
    except MultigrainError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
