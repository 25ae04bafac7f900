"""``multigrain train SPEC``: train a model into a run directory, logged to MLflow."""
from __future__ import annotations

import json
import sys

from multigrain.platform.commands.common import add_spec_args, load_spec_args, positive_int

RESULT_KEYS = ("spec_hash", "run_dir", "finished", "best_epoch", "epochs_completed", "validation", "test", "seconds")


def register(sub) -> None:
    p = sub.add_parser("train", help="train a model from a spec")
    add_spec_args(p)
    p.add_argument("-s", "--serialization-dir", help="run directory (default runs/<spec>-<hash8>)")
    p.add_argument("--resume", action="store_true", help="continue the run in -s bit-identically; with a larger "
                   "trainer.num_epochs (and nothing else changed) extend it, when the schedule does not depend on "
                   "num_epochs")
    p.add_argument("--stop-after-epoch", type=positive_int, help="stop after this many epochs (resume later)")
    p.add_argument("--dry-run", action="store_true", help="read the data, build the vocabulary and the model, make "
                   "every check a training makes before its first file, report the examples, vocabulary, "
                   "parameters (per optimizer group) and steps, and train nothing: nothing is written")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///mlruns.db)")
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="train data-parallel on N Ray Train workers (DDP; each takes a slice of every batch): "
                        "sets trainer.workers, which is part of the run's spec and hash (default: the spec's, 1)")
    p.add_argument("--address", help="with more than one worker: the Ray cluster HOST:6379 (default: start Ray in "
                                     "this process, on 127.0.0.1)")
    p.set_defaults(func=train)


def train(args) -> int:
    from multigrain.platform.commands.checks import check_run_dir

    if args.dry_run and (given := [flag for flag, value in (("--resume", args.resume), ("--stop-after-epoch",
                                   args.stop_after_epoch), ("--address", args.address)) if value]):
        from multigrain.platform.errors import ConfigurationError

        raise ConfigurationError(f"--dry-run trains nothing: {', '.join(given)} cannot go with it")
    if args.serialization_dir is not None:  # before anything is read: a file, /proc, a name too long...
        check_run_dir(args.serialization_dir)
    spec = load_spec_args(args)  # before torch is imported: the Jsonnet child forks from a small process
    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger

    if args.workers is not None:
        from multigrain.platform.errors import ConfigurationError
        from multigrain.platform.training import with_workers

        if any(o.split("=", 1)[0].strip() == "trainer.workers" for o in args.override):
            raise ConfigurationError("--workers and -o trainer.workers=... both set trainer.workers; give one")
        spec, note = with_workers(spec, args.workers)
        if note:
            print(f"note: {note}", file=sys.stderr)
    if args.serialization_dir is None:  # runs/<spec name>-<hash8>: a spec's name may be too long for it
        from multigrain.platform.runs import default_run_dir
        from multigrain.platform.specs import spec_hash

        check_run_dir(default_run_dir(args.spec, spec_hash(spec)), "run directory")
    run = Run(spec, args.serialization_dir, source=args.spec)
    if args.dry_run:
        return report_dry_run(args.spec, run)
    data_parallel = None  # the run knows no Ray: Ray Train's executor is handed to it here
    if run.trainer.workers > 1:
        from multigrain.platform.ray.train import RayTrainCluster

        data_parallel = RayTrainCluster(args.address, tuple(args.include_package)).launcher
    elif args.address:
        from multigrain.platform.errors import ConfigurationError

        raise ConfigurationError("--address: this run trains in this process (trainer.workers is 1); give "
                                 "--workers N (N > 1) to train on a Ray cluster")
    from multigrain.platform.specs import parse_ext_vars

    run.ext_vars = parse_ext_vars(args.ext_var)  # recorded in metrics.json and MLflow, named on the leaderboard
    logger = None if args.no_tracking else RunLogger(args.tracking_uri, ext_vars=run.ext_vars)
    print_result(run.train(resume=args.resume, stop_after_epoch=args.stop_after_epoch, logger=logger,
                           data_parallel=data_parallel))
    return 0


def report_dry_run(source: str, run) -> int:
    from multigrain.platform.dry_run import dry_run, report_lines

    print("\n".join(report_lines(source, dry_run(run))))
    return 0


def print_result(result: dict) -> None:
    print(json.dumps({k: result.get(k) for k in RESULT_KEYS}, indent=2, ensure_ascii=False, default=float))
