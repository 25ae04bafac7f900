"""``multigrain leaderboard [TASK | --all]``: the runs of a task ranked from MLflow, groups of seeds
as mean ± std beside the paper's number; ``--export``/``--import`` the portable leaderboard file
that merges runs trained on several machines into one store."""
from __future__ import annotations

FORMATS = ("table", "md", "csv", "json")


def register(sub) -> None:
    p = sub.add_parser("leaderboard", help="rank the runs of a task from MLflow; export/import the portable file")
    p.add_argument("task", nargs="?", help="an experiment such as ner/resume, or a task such as ner")
    p.add_argument("--all", action="store_true", help="every experiment of the store")
    p.add_argument("--metric", help="metric key that ranks (default: each run's leaderboard metric)")
    p.add_argument("--format", choices=FORMATS, help="table (the default), md, csv or json")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--no-group", action="store_true", help="one row per spec hash instead of per group of seeds")
    p.add_argument("--full-test-only", action="store_true",
                   help="hide rows not scored on a whole test set (a test reader's max_instances, or a validation "
                        "score of a run not evaluated on test)")
    p.add_argument("--export", metavar="FILE", help="write the finished leaderboard runs (metrics, curves, tags, "
                                                    "spec hashes) to a portable file")
    p.add_argument("--import", dest="import_file", metavar="FILE",
                   help="add the runs of a portable file that the store does not hold yet (idempotent)")
    p.add_argument("--tracking-uri")
    p.set_defaults(func=leaderboard)


def leaderboard(args) -> int:
    import sys

    from multigrain.platform.errors import ConfigurationError

    if args.task and args.all:
        raise ConfigurationError("give a TASK or --all, not both")
    if not (args.task or args.all or args.import_file is not None):
        raise ConfigurationError("give a TASK (an experiment such as ner/resume, or a task such as ner) or --all")
    if args.export and not (args.task or args.all):
        raise ConfigurationError("--export: give a TASK or --all too (what to export)")
    if args.json and args.format not in (None, "json"):
        raise ConfigurationError(f"--json and --format {args.format}: give one of them")
    from multigrain.platform.tracking import open_store, tracking_uri

    uri = tracking_uri(args.tracking_uri)
    task = None if args.all else args.task
    if args.export:  # before anything is imported: the file must not be the store or what --import reads
        from multigrain.platform.commands.common import refuse_replacing
        from multigrain.platform.store_checks import sqlite_file

        refuse_replacing(args.export, "--export", {sqlite_file(uri): "the tracking store",
                                                   args.import_file: "the file --import reads"})
    if args.import_file is not None:
        from multigrain.platform.portable import import_runs, read_board
        from multigrain.platform.store import adding_runs

        runs = read_board(args.import_file)  # every run checked before the store is touched
        with adding_runs(uri):
            added, there = import_runs(open_store(uri), runs)
        print(f"{args.import_file}: imported {added} runs ({there} already in the store) into {uri}", file=sys.stderr)
        if not (args.task or args.all):
            return 0
    if args.export:
        from multigrain.platform.portable import write_board
        from multigrain.platform.records import FINISHED_BOARD, records

        client = open_store(uri, create=False)
        if client is None:
            raise ConfigurationError(f"no MLflow store at {uri}: nothing to export")
        recs = records(client, task, FINISHED_BOARD, history=True)
        write_board(args.export, recs)
        print(f"{args.export}: exported {len(recs)} runs of {task or 'every experiment'}", file=sys.stderr)
        return 0
    from multigrain.platform.leaderboard import leaderboard as rows_of, render

    rows = rows_of(task, uri, args.metric, group_seeds=not args.no_group, full_test_only=args.full_test_only)
    render(task or "all experiments", rows, "json" if args.json else args.format or "table")
    return 0
