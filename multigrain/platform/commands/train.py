"""``multigrain train SPEC``: train a model into a run directory, logged to MLflow."""
from __future__ import annotations

import json

from multigrain.platform.commands.common import add_spec_args, load_spec_args

RESULT_KEYS = ("spec_hash", "run_dir", "finished", "best_epoch", "epochs_completed", "validation", "test", "seconds")


def register(sub) -> None:
    p = sub.add_parser("train", help="train a model from a spec")
    add_spec_args(p)
    p.add_argument("-s", "--serialization-dir", help="run directory (default runs/<spec>-<hash8>)")
    p.add_argument("--resume", action="store_true", help="continue the run in -s bit-identically; with a larger "
                   "trainer.num_epochs (and nothing else changed) extend it, when the schedule does not depend on "
                   "num_epochs")
    p.add_argument("--stop-after-epoch", type=int, help="stop after this many epochs (resume later)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///mlruns.db)")
    p.add_argument("--no-tracking", action="store_true", help="do not log to MLflow")
    p.set_defaults(func=train)


def train(args) -> int:
    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger

    run = Run(load_spec_args(args), args.serialization_dir, source=args.spec)
    logger = None if args.no_tracking else RunLogger(args.tracking_uri)
    print_result(run.train(resume=args.resume, stop_after_epoch=args.stop_after_epoch, logger=logger))
    return 0


def print_result(result: dict) -> None:
    print(json.dumps({k: result.get(k) for k in RESULT_KEYS}, indent=2, ensure_ascii=False, default=float))
