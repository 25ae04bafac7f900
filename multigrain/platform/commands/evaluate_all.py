"""``multigrain evaluate-all``: archives x data files on a pool of Ray actors, each result
recorded as a leaderboard row in MLflow."""
from __future__ import annotations

import argparse

from multigrain.platform.commands.common import add_reader_arg, non_negative_float, positive_float, positive_int


def register(subparsers) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "evaluate-all", help="evaluate archives on data files with a pool of Ray actors; record leaderboard rows "
                             "in MLflow")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--data", nargs="+", required=True, metavar="PATH",
                   help="data files in the archives' format, or names of the specs' test_sets (e.g. wmt22)")
    p.add_argument("--actors", type=int, help="evaluator actors (default: one per archive, as resources allow)")
    p.add_argument("--num-cpus", type=positive_float, default=1.0)
    p.add_argument("--num-gpus", type=non_negative_float,
                   help="GPUs per actor (default 1 when the cluster has GPUs)")
    p.add_argument("--batch-size", type=positive_int, help="default: each spec's data_loader.eval_batch_size")
    add_reader_arg(p)
    p.add_argument("--address")
    p.add_argument("--tracking-uri")
    p.add_argument("--no-tracking", action="store_true", help="print only; log nothing to MLflow")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate_all)


def cmd_evaluate_all(args) -> int:
    import json

    from multigrain.platform.ray.archives import check_archives
    from multigrain.platform.ray.cluster import connect, shutdown
    from multigrain.platform.ray.evaluate import (evaluate_all, print_evaluations, record_evaluations,
                                                   split_data_arguments)

    files, _ = split_data_arguments(args.run_dirs, args.data)
    check_archives(args.run_dirs, files)
    started = connect(args.address, loopback=args.address in (None, "", "local"))
    try:
        rows = evaluate_all(args.run_dirs, args.data, actors=args.actors, num_cpus=args.num_cpus,
                            num_gpus=args.num_gpus, batch_size=args.batch_size, reader=args.reader)
    finally:
        if started:
            shutdown()
    if not args.no_tracking:
        record_evaluations(rows, args.tracking_uri)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=float))
    else:
        print_evaluations(rows)
    return 1 if any("error" in r for r in rows) else 0
