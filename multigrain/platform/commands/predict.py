"""``multigrain predict RUN_DIR INPUT``: predictions of a run's model, one JSON line per example; an
input the model cut (a translator's source over ``max_source_length`` with ``truncate: true``) is
marked ``"truncated": true`` in its prediction, and one warning per file says how many were cut."""
from __future__ import annotations

import json
import sys

from multigrain.platform.commands.checks import DEVICES, device
from multigrain.platform.commands.common import AtomicOutput, add_reader_arg, positive_int, run_paths_kept


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with an archive; JSON lines out")
    p.add_argument("archive", metavar="RUN_DIR")
    p.add_argument("input", help='JSON lines ({"text": ...}) or a data file in the reader\'s format')
    p.add_argument("--output-file")
    p.add_argument("--batch-size", type=positive_int, help="default: the spec's data_loader.eval_batch_size")
    p.add_argument("--use-dataset-reader", action="store_true",
                   help="read INPUT with the spec's reader (--reader) even when it ends in .jsonl/.json")
    add_reader_arg(p)
    p.add_argument("--device", type=device, help=f"where the model runs: {DEVICES} (default: the spec's "
                                                 f"trainer.cuda_device, else a GPU if there is one)")
    p.set_defaults(func=predict)


def predict(args) -> int:
    from multigrain.platform.errors import ConfigurationError, DataError
    from multigrain.platform.paths import input_problem
    from multigrain.platform.runs import Run

    # a path that cannot become a file, or that would replace the input or a file of the run, is refused before any work
    output = AtomicOutput(args.output_file, keep={args.input: "the input file", **run_paths_kept(args.archive)})
    run = Run.open(args.archive)
    if refused := run.prediction_refused():
        raise ConfigurationError(refused)
    from_reader = args.use_dataset_reader or not args.input.endswith((".jsonl", ".json"))
    if problem := input_problem(args.input, "data file" if from_reader else "input file"):  # before the model loads
        raise ConfigurationError(problem)
    archive = run.load_archive(device=args.device, reader=args.reader)
    instances = archive.read(args.input) if from_reader else archive.read_json_lines(args.input)
    if not instances:
        raise DataError(args.input, None, "no instances in the file (" + (
            f"the {args.reader} reader kept none)" if from_reader else "it is empty or holds only blank lines)"))
    predicted = cut = 0
    with output as out:  # a later failure leaves no half-written file
        for pred in archive.predict_batches(instances, args.batch_size):
            out.write(json.dumps(pred, ensure_ascii=False) + "\n")
            predicted += 1
            cut += isinstance(pred, dict) and pred.get("truncated") is True
    how = f"with the {args.reader} reader ({getattr(archive.reader, 'registered_name', '?')})" if from_reader \
        else "as JSON lines"
    print(f"{args.input}: {len(instances)} instances read {how}, {predicted} predicted", file=sys.stderr)
    if cut:
        print(truncation_warning(args.input, cut, predicted, archive.model), file=sys.stderr)
    return 0


def truncation_warning(path: str, cut: int, total: int, model) -> str:
    """One warning for a file whose inputs the model cut (predictions marked ``"truncated": true``)."""
    limit = getattr(model, "max_source_length", None)
    return (f"warning: {path}: {cut} of {total} inputs were longer than the model takes"
            f"{f' (max_source_length {limit})' if limit is not None else ''} and were cut; only their beginning "
            f"was predicted (their predictions say \"truncated\": true)")
