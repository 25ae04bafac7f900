"""``multigrain sweep``: a grid x seeds of a spec as Ray tasks, ranked by grid point."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    from multigrain.platform.commands.common import add_spec_args, non_negative_int

    p = subparsers.add_parser("sweep", help="run a grid x seeds of a spec as Ray tasks; rank the grid points",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              description="Each trial is the spec with one grid point and one seed applied; its "
                                          "spec hash is its identity and names its run directory.\nExample:\n  "
                                          "multigrain sweep SPEC --grid 'trainer.optimizer.lr=[1e-3,3e-3]' --seeds 3")
    add_spec_args(p)
    p.add_argument("--grid", action="append", default=[], metavar="KEY.PATH=[V1,V2,...]",
                   help="values of one spec key (a JSON list); repeat for a product grid")
    p.add_argument("--seeds", type=int, default=1, help="seeds per grid point: the spec's seed, +1, ... (default 1)")
    p.add_argument("--address", help="Ray cluster address HOST:6379 (default: start Ray in this process)")
    p.add_argument("--resources", metavar="JSON",
                   help='Ray options per trial, e.g. \'{"num_cpus":1,"num_gpus":0.5}\' (default: 1 CPU, and 1 GPU '
                        'when the cluster has GPUs unless trainer.cuda_device is -1)')
    p.add_argument("--gpus-per-trial", type=float, metavar="F",
                   help="GPUs of each trial: a fraction runs several trials on one GPU at once (0.25: four); "
                        "the same as --resources '{\"num_gpus\": F}'")
    p.add_argument("--resume", action="store_true",
                   help="skip trials whose spec hash has a FINISHED run in MLflow; continue the others")
    p.add_argument("--max-retries", type=non_negative_int, default=2,
                   help="retries of a trial whose worker dies (default 2)")
    p.add_argument("--runs-root", default="runs/sweeps", help="trial run dirs: RUNS_ROOT/<spec name>/<hash8>")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///mlruns.db)")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    import json
    import sys

    from multigrain.platform.commands.checks import check_runs_root
    from multigrain.platform.commands.common import load_spec_args, spec_stem
    from multigrain.platform.ray.cluster import check_reachable
    from multigrain.platform.ray.sweep import expand_sweep, plan_trials, validate_trials
    from multigrain.platform.ray.sweep_options import parse_grid, parse_resources, with_gpus_per_trial
    from multigrain.platform.ray.sweep_report import print_summary

    # everything that can be wrong is found before Ray starts or anything is scheduled
    grid = parse_grid(args.grid)
    refuse_grid_overrides(grid, args.override or [])
    requested = with_gpus_per_trial(parse_resources(args.resources), args.gpus_per_trial)
    if args.address not in (None, "", "local", "auto") and not args.address.startswith(("http://", "https://")):
        check_reachable(args.address)
    spec = load_spec_args(args)
    trials = expand_sweep(spec, grid, args.seeds, spec_stem(args.spec), args.runs_root)
    validate_trials(trials, args.spec)
    check_runs_root(args.runs_root, [t.run_dir for t in trials], "--runs-root")
    plan_trials(trials, resume=args.resume, uri=args.tracking_uri)
    todo = [t for t in trials if t.state == "PENDING"]
    from multigrain.platform.console import output_console

    console = output_console(160)
    skipped = len(trials) - len(todo)
    print(f"sweep {args.spec}: {len(trials)} trials ({len(trials) // args.seeds} grid points x {args.seeds} "
          f"seed{'s' if args.seeds > 1 else ''}){f', {skipped} already finished' if skipped else ''}", flush=True)
    if todo:
        from multigrain.platform.ray.cluster import cluster_resources, connect, shutdown
        from multigrain.platform.ray.sweep import check_placement, trial_resources

        started = False
        try:
            started = connect(args.address, loopback=args.address in (None, "", "local"), worker_niceness=0)
            cluster = cluster_resources()
            options = trial_resources(requested, spec, cluster)
            for warning in check_placement(options, todo, cluster, local=args.address in (None, "", "local")):
                print(f"warning: {warning}", file=sys.stderr)
            print(f"each trial: {json.dumps(options)}; cluster: {json.dumps(cluster)}", flush=True)
            _run_with_display(todo, trials, options, args, console)
        finally:
            if started:
                shutdown()
    print_summary(trials, console)
    failed = [t for t in trials if t.state == "FAILED" or t.error]
    return 1 if failed else 0


def _run_with_display(todo, trials, options, args, console) -> None:
    """Run the sweep with a live table of trials, or when quiet with lines (``QuietReport``)."""
    from multigrain.platform.progress import quiet
    from multigrain.platform.ray.sweep import run_sweep
    from multigrain.platform.ray.sweep_report import QuietReport, trials_table

    kwargs = dict(max_retries=args.max_retries, uri=args.tracking_uri, include_packages=tuple(args.include_package))
    if quiet():
        run_sweep(todo, options, on_update=QuietReport(lambda line: print(line, flush=True)), **kwargs)
        return
    from rich.live import Live

    with Live(trials_table(trials), refresh_per_second=4, console=console) as live:
        run_sweep(todo, options, on_update=lambda _: live.update(trials_table(trials)), **kwargs)
        live.update(trials_table(trials))


def refuse_grid_overrides(grid: list, overrides: list[str]) -> None:
    """A key that both ``-o`` and ``--grid`` set: the grid's values would replace the ``-o`` value
    in every trial, in silence; which was meant is not for us to guess."""
    from multigrain.platform.errors import Problem, SpecError
    from multigrain.platform.specs import parse_override

    given = set()
    for text in overrides:
        try:
            given.add(parse_override(text)[0].lstrip("+"))
        except SpecError:
            pass  # reported when the spec is loaded
    both = [key for key, _ in grid if key in given]
    if both:
        raise SpecError([Problem(f"--grid {key}", f"also set by -o {key}; give its values in one place (the grid)",
                                 "override") for key in both])
