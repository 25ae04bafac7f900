"""``multigrain predict RUN_DIR INPUT``: predictions of a run's model, one JSON line per example."""
from __future__ import annotations

import json
import sys

from multigrain.platform.commands.common import AtomicOutput, add_reader_arg, positive_int


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with an archive; JSON lines out")
    p.add_argument("archive", metavar="RUN_DIR")
    p.add_argument("input", help='JSON lines ({"text": ...}) or a data file in the reader\'s format')
    p.add_argument("--output-file")
    p.add_argument("--batch-size", type=positive_int, help="default: the spec's data_loader.eval_batch_size")
    p.add_argument("--use-dataset-reader", action="store_true",
                   help="read INPUT with the spec's reader (--reader) even when it ends in .jsonl/.json")
    add_reader_arg(p)
    p.add_argument("--device")
    p.set_defaults(func=predict)


def predict(args) -> int:
    from multigrain.platform.runs import Run

    archive = Run.open(args.archive).load_archive(device=args.device, reader=args.reader)
    from_reader = args.use_dataset_reader or not args.input.endswith((".jsonl", ".json"))
    instances = archive.read(args.input) if from_reader else archive.read_json_lines(args.input)
    predicted = 0
    with AtomicOutput(args.output_file) as out:  # a later failure leaves no half-written file
        for pred in archive.predict_batches(instances, args.batch_size):
            out.write(json.dumps(pred, ensure_ascii=False) + "\n")
            predicted += 1
    how = f"with the {args.reader} reader ({getattr(archive.reader, 'registered_name', '?')})" if from_reader \
        else "as JSON lines"
    print(f"{args.input}: {len(instances)} instances read {how}, {predicted} predicted", file=sys.stderr)
    return 0
