"""``multigrain suite SUITE``: every spec x seed x configuration of a suite file trained on Ray
(reusing finished runs, resuming unfinished ones), logged to MLflow; ``--check`` compares the
runs' scores with a committed leaderboard export."""
from __future__ import annotations

import argparse

DEFAULT_BOARD = "benchmarks/results/leaderboard.json"


def register(subparsers) -> None:
    from multigrain.platform.commands.common import (JSONNET_TIMEOUT, folder, non_negative_float, non_negative_int,
                                                     positive_int, seconds)

    p: argparse.ArgumentParser = subparsers.add_parser(
        "suite", help="train every run of a suite file (specs x seeds x configurations) on Ray, or check its "
                      "scores against a committed leaderboard")
    p.add_argument("suite", help="a suite file (jsonnet_configs/suites/*.jsonnet)")
    p.add_argument("--address", help="a Ray cluster HOST:6379 (default: a local Ray on 127.0.0.1)")
    p.add_argument("--only", nargs="+", metavar="PATTERN",
                   help="only the entries whose name matches one of these (fnmatch: 'resume_*'; brackets are literal)")
    p.add_argument("--seeds", type=int, nargs="+", metavar="SEED",
                   help="only the runs of these seeds (e.g. --seeds 13: one seed of every entry first)")
    p.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override every run's spec after its entry's overrides, as `train -o` does "
                        "(e.g. -o +dataset_reader.max_instances=40 for a rehearsal); part of each run's hash")
    p.add_argument("--dry-run", action="store_true", help="list the runs, what would be reused or resumed, and "
                                                         "their resources; run nothing")
    p.add_argument("--check", nargs="?", const=DEFAULT_BOARD, metavar="BOARD",
                   help=f"compare the finished runs with a leaderboard export (default {DEFAULT_BOARD}); trains "
                        f"nothing; exit 1 if an entry differs")
    p.add_argument("--runs-dir", default="runs", help="where the run directories are (default runs/)")
    p.add_argument("--num-cpus", type=positive_int, help="CPUs of the local Ray (default: all)")
    p.add_argument("--num-gpus", type=non_negative_float, metavar="N",
                   help="GPUs of the local Ray (default: those it finds); on a machine without one, N "
                        "logical GPUs let entries that ask for a GPU fraction run on the CPU (a rehearsal)")
    p.add_argument("--max-retries", type=non_negative_int, default=2,
                   help="retries of a run whose worker died (default 2)")
    p.add_argument("--tracking-uri")
    p.add_argument("--no-tracking", action="store_true")
    p.add_argument("--jsonnet-path", action="append", default=[], metavar="DIR", type=folder)
    p.add_argument("--jsonnet-timeout", type=seconds, default=JSONNET_TIMEOUT, metavar="SECONDS")
    p.set_defaults(func=cmd_suite)


def cmd_suite(args) -> int:
    from multigrain.platform.errors import ConfigurationError, SpecError
    from multigrain.platform import suite as suites
    from multigrain.platform.specs import repeated_overrides

    if problems := repeated_overrides(args.override or []):  # the command line's own: its entries' may layer
        raise SpecError(problems, args.suite)
    definition = suites.load_suite(args.suite, args.jsonnet_path, args.jsonnet_timeout)
    trains = not args.dry_run and args.check is None  # data files and vectors need exist only for that
    runs = suites.plan(args.suite, definition, args.runs_dir, args.only, args.jsonnet_path, args.jsonnet_timeout,
                       check_data_paths=trains, seeds=args.seeds, overrides=args.override)
    if args.check is not None:
        from multigrain.platform.portable import read_board

        from multigrain.platform.suite_check import check, check_lines

        verdicts = check(runs, read_board(args.check))
        for line in check_lines(verdicts):
            print(line)
        return 1 if any(v["verdict"] == "differs" for v in verdicts) else 0
    lines = suites.describe_plan(runs)
    if args.dry_run:
        print("\n".join(lines))
        return 0
    print(lines[-1], flush=True)
    from multigrain.platform.commands.checks import check_runs_root
    from multigrain.platform.ray.suite import reuse_finished, run_suite

    check_runs_root(args.runs_dir, [r.run_dir for r in runs], "--runs-dir")

    outcome = reuse_finished(runs, args.tracking_uri, not args.no_tracking, lambda line: print(line, flush=True))
    if len(outcome) == len(runs):
        return _summary(runs, outcome)
    from multigrain.platform.ray.cluster import check_reachable, connect, shutdown

    if args.address not in (None, "", "local", "auto"):
        check_reachable(args.address)
    local = {"num_cpus": args.num_cpus} if args.num_cpus else {}
    if args.num_gpus is not None:
        local["num_gpus"] = args.num_gpus
    # the trainings at the command's own priority, as `multigrain train` runs one (not Ray's nice 15)
    started = connect(args.address, loopback=args.address in (None, "", "local"), worker_niceness=0, **local)
    try:
        if started:  # a local Ray has what it has: an entry that can never be placed would wait forever
            from multigrain.platform.ray.cluster import cluster_resources

            problems = suites.unplaceable(runs, cluster_resources())
            if problems:
                raise ConfigurationError("; ".join(problems) + " (--num-cpus / --num-gpus, or the entry's resources)")
        outcome = run_suite(runs, args.max_retries, args.tracking_uri, not args.no_tracking,
                            tuple(args.include_package), lambda line: print(line, flush=True),
                            outcome=outcome)
    finally:
        if started:
            shutdown()
    return _summary(runs, outcome)


def _scores(result: dict) -> str:
    """``test f1 0.9294, ...``, or for a run of named test sets (translation) each set's
    leaderboard metric: ``tvsub bleu 2.4300; wmt22 bleu_cased 0.2000``."""
    if result.get("test_sets"):
        sets = result["test_sets"].items()
        return "; ".join(f"{name} {s['leaderboard_metric']} {s['metrics'][s['leaderboard_metric']]:.4f}"
                         for name, s in sets if s.get("leaderboard_metric") in s.get("metrics", {}))
    test = result.get("test") or {}
    return "test " + ", ".join(f"{k} {v:.4f}" for k, v in test.items() if k != "loss")


def summary_lines(runs, outcome: dict) -> list[str]:
    """One line per run: its state, label and scores (or error)."""
    lines = []
    for r in runs:
        o = outcome.get(r.index, {})
        scores = _scores(o["result"]) if o.get("result") else ""  # a failed or stopped run has none
        lines.append(f"{o.get('state', '?'):<9} {r.label:<40} {scores}"
                     + (f"  ({o['error']})" if o.get("error") else ""))
    return lines


def _summary(runs, outcome: dict) -> int:
    for line in summary_lines(runs, outcome):
        print(line)
    return 1 if any(outcome.get(r.index, {}).get("state") == "failed" for r in runs) else 0
