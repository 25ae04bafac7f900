"""``multigrain predict RUN_DIR INPUT``: predictions of a run's model, one JSON line per example."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with an archive; JSON lines out")
    p.add_argument("archive", metavar="RUN_DIR")
    p.add_argument("input", help='JSON lines ({"text": ...}) or a data file in the reader\'s format')
    p.add_argument("--output-file")
    p.add_argument("--batch-size", type=int, help="default: the spec's data_loader.eval_batch_size")
    p.add_argument("--use-dataset-reader", action="store_true")
    p.add_argument("--device")
    p.set_defaults(func=predict)


def predict(args) -> int:
    from multigrain.platform.runs import Run

    archive = Run.open(args.archive).load_archive(device=args.device)
    if args.input.endswith((".jsonl", ".json")) and not args.use_dataset_reader:
        instances = archive.read_json_lines(args.input)
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
