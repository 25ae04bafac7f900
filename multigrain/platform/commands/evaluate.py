"""``multigrain evaluate RUN_DIR DATA``: metrics of a run's best weights on a data file, read with
the spec's test reader (or ``--reader``), or ``--test-set NAME``: one of the spec's test sets, read
with its own reader as the leaderboard scores it; says how many instances were read and scored,
and what the model notes about the evaluation (a translator: the reference streams, the sacrebleu
signature, the sources cut). ``--references FILE...`` adds line-aligned reference files."""
from __future__ import annotations

import json
import sys

from multigrain.platform.commands.checks import DEVICES, device
from multigrain.platform.commands.common import (AtomicOutput, add_reader_arg, positive_int, refuse_replacing,
                                                run_paths_kept)


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate an archive (run directory) on a data file or a test set of its spec")
    p.add_argument("archive", metavar="RUN_DIR")
    p.add_argument("data", nargs="?", metavar="DATA", help="a data file (or give --test-set)")
    p.add_argument("--test-set", metavar="NAME",
                   help="instead of DATA: the spec's test set NAME (test_sets), its file read with its own reader "
                        "(every reference), as the training and the leaderboard score it")
    p.add_argument("--references", nargs="+", action="extend", metavar="FILE",
                   help="more reference files, each line-aligned with the data file (translation readers of "
                        "line-aligned references: tvsub, parallel_refs); read as the reader reads its own")
    p.add_argument("--output-file", help="write the metrics there (JSON)")
    p.add_argument("--batch-size", type=positive_int, help="default: the spec's data_loader.eval_batch_size")
    p.add_argument("--device", type=device, help=f"where the model runs: {DEVICES} (default: the spec's "
                                                 f"trainer.cuda_device, else a GPU if there is one)")
    add_reader_arg(p)
    p.add_argument("--json", action="store_true",
                   help="print {data, test_set, reader, reader_type, instances_read, instances_scored, metrics, "
                        "evaluation} instead of the metrics alone (evaluation: the model's notes, e.g. "
                        "reference_streams, sacrebleu_signature, sources_truncated)")
    p.set_defaults(func=evaluate)


def count_line(data: str, scores) -> str:
    """``DATA: 1343 instances read with the test reader (conll), 1343 scored`` (+ the reader's split)."""
    kept = (f"; the reader keeps only its split {scores.reader_split!r} of the file"
            if scores.reader_split not in (None, "all") else "")
    kind = f" ({scores.reader_type})" if scores.reader_type else ""
    return f"{data}: {scores.read} instances read with the {scores.reader} reader{kind}, {scores.scored} scored{kept}"


def notes_line(data: str, notes: dict) -> str:
    """``DATA: reference streams 3; ranked by bleu; sacrebleu signature nrefs:3|...; ...``."""
    return f"{data}: " + "; ".join(f"{key.replace('_', ' ')} {value}" for key, value in notes.items())


def evaluate(args) -> int:
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.evaluation import evaluate_counted
    from multigrain.platform.paths import input_problem
    from multigrain.platform.run_archive import Scores
    from multigrain.platform.runs import Run
    from multigrain.platform.test_sets import evaluation_notes, named_set, set_of_path, with_references

    if (args.data is None) == (args.test_set is None):
        raise ConfigurationError("give a data file (DATA) or --test-set NAME (a test set of the run's spec), "
                                 + ("not both" if args.data else "one of them"))
    # a path that cannot become a file, or that would replace what is read, is refused before any work
    keep = {args.data: "the data file", **{ref: "a reference file" for ref in args.references or ()},
            **run_paths_kept(args.archive)}
    output = AtomicOutput(args.output_file, keep=keep) if args.output_file else None
    run = Run.open(args.archive)
    if args.test_set is not None:
        chosen = named_set(run, args.test_set)
        data, reader, label = chosen.path, chosen.reader, f"test set {args.test_set!r}"
        if output is not None:
            refuse_replacing(args.output_file, "--output-file", {data: f"the data file of test set {args.test_set!r}"})
    else:
        if problem := input_problem(args.data, "data file"):  # before the model is loaded
            raise ConfigurationError(problem)
        data, reader, label = args.data, run.experiment.reader_for(args.reader), args.reader
    if args.references:
        reader = with_references(reader, args.references, data)
    archive = run.load_archive(device=args.device)
    instances = archive.read(data, reader)
    metrics, scored = evaluate_counted(archive.model, archive.batches(instances, args.batch_size), archive.device,
                                       desc=f"evaluate {data}")
    scores = Scores(metrics, len(instances), scored, label, getattr(reader, "registered_name", ""),
                    getattr(reader, "split", None))
    notes = evaluation_notes(archive.model)
    if output is not None:
        with output as out:
            out.write(json.dumps(scores.metrics, indent=2, ensure_ascii=False, default=float))
    if args.json:
        print(json.dumps({"data": data, "test_set": args.test_set, "reader": scores.reader,
                          "reader_type": scores.reader_type, "instances_read": scores.read,
                          "instances_scored": scores.scored, "metrics": scores.metrics, "evaluation": notes},
                         indent=2, ensure_ascii=False))
    else:
        print(json.dumps(scores.metrics, indent=2))
    print(count_line(data, scores), file=sys.stderr)
    if notes:
        print(notes_line(data, notes), file=sys.stderr)
    same = set_of_path(run, data) if args.test_set is None else None
    if same is not None:
        print(f"note: {data} is the data file of the spec's test set {same!r}, which the training and the "
              f"leaderboard score with that set's own reader (all of its references): multigrain evaluate "
              f"{args.archive} --test-set {same}", file=sys.stderr)
    return 0
