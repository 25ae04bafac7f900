"""``multigrain evaluate RUN_DIR DATA``: metrics of a run's best weights on a data file."""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate an archive (run directory) on a data file")
    p.add_argument("archive", metavar="RUN_DIR")
    p.add_argument("data")
    p.add_argument("--output-file")
    p.add_argument("--batch-size", type=int, help="default: the spec's data_loader.eval_batch_size")
    p.add_argument("--device")
    p.set_defaults(func=evaluate)


def evaluate(args) -> int:
    from pathlib import Path

    from multigrain.platform.runs import Run
    from multigrain.platform.training import write_json

    metrics, _ = Run.open(args.archive).evaluate(args.data, args.batch_size, args.device)
    if args.output_file:
        write_json(Path(args.output_file), metrics)
    print(json.dumps(metrics, indent=2))
    return 0
