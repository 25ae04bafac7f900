"""``multigrain evaluate RUN_DIR DATA``: metrics of a run's best weights on a data file, read with
the spec's test reader (or ``--reader``); says how many instances were read and scored."""
from __future__ import annotations

import json
import sys

from multigrain.platform.commands.common import add_reader_arg, positive_int


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate an archive (run directory) on a data file")
    p.add_argument("archive", metavar="RUN_DIR")
    p.add_argument("data")
    p.add_argument("--output-file", help="write the metrics there (JSON)")
    p.add_argument("--batch-size", type=positive_int, help="default: the spec's data_loader.eval_batch_size")
    p.add_argument("--device")
    add_reader_arg(p)
    p.add_argument("--json", action="store_true",
                   help="print {data, reader, reader_type, instances_read, instances_scored, metrics} instead of "
                        "the metrics alone")
    p.set_defaults(func=evaluate)


def count_line(data: str, scores) -> str:
    """``DATA: 1343 instances read with the test reader (conll), 1343 scored`` (+ the reader's split)."""
    kept = (f"; the reader keeps only its split {scores.reader_split!r} of the file"
            if scores.reader_split not in (None, "all") else "")
    kind = f" ({scores.reader_type})" if scores.reader_type else ""
    return f"{data}: {scores.read} instances read with the {scores.reader} reader{kind}, {scores.scored} scored{kept}"


def evaluate(args) -> int:
    from pathlib import Path

    from multigrain.platform.runs import Run
    from multigrain.platform.training import write_json

    scores = Run.open(args.archive).score(args.data, args.batch_size, args.device, reader=args.reader)
    if args.output_file:
        write_json(Path(args.output_file), scores.metrics)
    if args.json:
        print(json.dumps({"data": args.data, "reader": scores.reader, "reader_type": scores.reader_type,
                          "instances_read": scores.read, "instances_scored": scores.scored,
                          "metrics": scores.metrics}, indent=2, ensure_ascii=False))
    else:
        print(json.dumps(scores.metrics, indent=2))
    print(count_line(args.data, scores), file=sys.stderr)
    return 0
