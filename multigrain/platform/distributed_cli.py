"""The Ray commands of ``multigrain``: sweep, serve, evaluate-all, submit, jobs.

Only argparse at module level: ``multigrain --help`` must not import Ray.
"""
from __future__ import annotations

import argparse
import json
import sys


def _spec_args(p) -> None:
    p.add_argument("spec", help="a Jsonnet or JSON spec")
    p.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one spec value (JSON, or a bare string); the key must exist")
    p.add_argument("--ext-var", action="append", default=[], metavar="NAME=VALUE",
                   help="a Jsonnet external variable")


def _load_spec(args) -> dict:
    from multigrain.platform.commands.common import load_spec_args

    return load_spec_args(args)


def _stem(path: str) -> str:
    from pathlib import Path

    return Path(path).name.split(".")[0]


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class _SigtermAsInterrupt:
    """SIGTERM unwinds like Ctrl-C while a command runs, so the ``finally`` that shuts down the
    in-process Ray runs (the default SIGTERM exit would orphan Ray's agents)."""

    def __enter__(self):
        import signal
        import threading

        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, _interrupt)
        return self

    def __exit__(self, *exc):
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
        return False


def _with_sigterm(command):
    def run(args):
        with _SigtermAsInterrupt():
            return command(args)

    run.__name__ = command.__name__
    run.__doc__ = command.__doc__
    return run


# ---------------------------------------------------------------------------- sweep
def cmd_sweep(args) -> int:
    from multigrain.platform import distributed as D

    # everything that can be wrong is found before Ray starts or anything is scheduled
    grid = D.parse_grid(args.grid)
    requested = D.parse_resources(args.resources)
    if args.address not in (None, "", "local", "auto") and not args.address.startswith(("http://", "https://")):
        D.check_reachable(args.address)
    spec = _load_spec(args)
    trials = D.expand_sweep(spec, grid, args.seeds, _stem(args.spec), args.runs_root)
    D.validate_trials(trials, args.spec)
    D.plan_trials(trials, resume=args.resume, uri=args.tracking_uri)
    todo = [t for t in trials if t.state == "PENDING"]
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 160)
    skipped = len(trials) - len(todo)
    print(f"sweep {args.spec}: {len(trials)} trials ({len(trials) // args.seeds} grid points x {args.seeds} "
          f"seed{'s' if args.seeds > 1 else ''}){f', {skipped} already finished' if skipped else ''}", flush=True)
    if todo:
        import ray

        started = D.connect(args.address)
        try:
            cluster = D.cluster_resources()
            options = D.trial_resources(requested, spec, cluster)
            for warning in D.check_placement(options, todo, cluster, local=args.address in (None, "", "local")):
                print(f"warning: {warning}", file=sys.stderr)
            print(f"each trial: {json.dumps(options)}; cluster: {json.dumps(cluster)}", flush=True)
            _run_with_display(D, todo, trials, options, args, console)
        finally:
            if started:
                ray.shutdown()
    D.print_summary(trials, console)
    failed = [t for t in trials if t.state == "FAILED" or t.error]
    return 1 if failed else 0


def _run_with_display(D, todo, trials, options, args, console) -> None:
    from multigrain.platform.progress import quiet

    kwargs = dict(max_retries=args.max_retries, uri=args.tracking_uri, include_packages=tuple(args.include_package))
    if quiet():
        reported = set()

        def report(ts):
            for t in ts:
                if t.state in ("FINISHED", "FAILED", "STOPPED") and t.index not in reported:
                    reported.add(t.index)
                    print(f"[{t.index}] {t.label}: {t.state}" + (f" ({t.error})" if t.error else ""), flush=True)

        D.run_sweep(todo, options, on_update=report, **kwargs)
        return
    from rich.live import Live

    with Live(D.trials_table(trials), refresh_per_second=4, console=console) as live:
        D.run_sweep(todo, options, on_update=lambda _: live.update(D.trials_table(trials)), **kwargs)
        live.update(D.trials_table(trials))


# ---------------------------------------------------------------------------- serve / evaluate-all
def cmd_serve(args) -> int:
    import signal
    import time

    import ray
    from ray import serve

    from multigrain.platform import distributed as D

    named = D.check_archives(args.run_dirs)
    D.check_port_free(args.host, args.port)
    started = D.connect(args.address)
    try:
        urls = D.start_service(named, host=args.host, port=args.port, replicas=args.replicas,
                               num_cpus=args.num_cpus, num_gpus=args.num_gpus)
        for name, url in urls.items():
            print(f"{name}: POST {url}", flush=True)
        example = next(iter(urls.values()))
        print(f"e.g. curl -s -X POST {example} -H 'Content-Type: application/json' "
              f"-d '{{\"instances\": [{{\"text\": \"张三是北京大学的教授\"}}]}}'", flush=True)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"warning: listening on {args.host}; the service has no authentication", file=sys.stderr)
        print("serving; Ctrl-C (or SIGTERM) stops", flush=True)
        signal.signal(signal.SIGINT, _interrupt)  # also when started in the background with SIGINT ignored
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        try:
            serve.shutdown()
        finally:
            if started:
                ray.shutdown()
    return 0


def cmd_evaluate_all(args) -> int:
    import ray

    from multigrain.platform import distributed as D

    D.check_archives(args.run_dirs, args.data)
    started = D.connect(args.address)
    try:
        rows = D.evaluate_all(args.run_dirs, args.data, actors=args.actors, num_cpus=args.num_cpus,
                              num_gpus=args.num_gpus, batch_size=args.batch_size)
    finally:
        if started:
            ray.shutdown()
    if not args.no_tracking:
        D.record_evaluations(rows, args.tracking_uri)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=float))
    else:
        D.print_evaluations(rows)
    return 1 if any("error" in r for r in rows) else 0


# ---------------------------------------------------------------------------- jobs
def cmd_submit(args) -> int:
    from pathlib import Path

    from multigrain.platform import distributed as D
    from multigrain.platform.config import validate
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.errors import SpecError
    from multigrain.platform.experiment import Experiment

    spec = _load_spec(args)
    problems = validate(spec, Experiment)  # data paths are checked where the job runs
    if problems:
        raise SpecError(problems, args.spec)
    for key in ("train_data_path", "validation_data_path", "test_data_path"):
        if isinstance(spec.get(key), str) and not Path(spec[key]).exists():
            print(f"note: {key} {spec[key]} is not here; it must exist where the job runs", file=sys.stderr)
    runtime_env = D.load_runtime_env(args.runtime_env, args.working_dir)
    num_gpus = args.num_gpus
    if num_gpus is None:
        device = (spec.get("trainer") or {}).get("cuda_device")
        num_gpus = 1 if isinstance(device, int) and not isinstance(device, bool) and device >= 0 else 0
    sid, created, status = D.submit_job(args.address, spec, _stem(args.spec), runtime_env=runtime_env,
                                        run_dir=args.serialization_dir, tracking_uri=args.tracking_uri,
                                        num_cpus=args.num_cpus, num_gpus=num_gpus, retry_failed=args.retry_failed,
                                        cwd=args.cwd)
    digest = spec_hash(spec)
    if created:
        print(f"submitted {sid} (spec hash {digest[:12]})", flush=True)
    else:
        print(f"{sid} was already submitted (spec hash {digest[:12]}), status {status}; not started again",
              flush=True)
    print(f"follow it: multigrain jobs {sid} --logs --address {args.address}", flush=True)
    if args.wait:
        status = D.wait_for_job(args.address, sid)
        print(D.job_details(args.address, sid, logs=True)["logs"])
        print(f"{sid}: {status}")
        return 0 if status == "SUCCEEDED" else 1
    return 0


def cmd_jobs(args) -> int:
    from multigrain.platform import distributed as D

    if args.id:
        info = D.job_details(args.address, args.id, logs=args.logs)
        if args.json:
            print(json.dumps(info, indent=2, ensure_ascii=False))
            return 0
        print(f"{info['submission_id']}: {info['status']}" + (f" ({info['message']})" if info["message"] else ""))
        print(f"entrypoint: {info['entrypoint'][:200]}")
        if args.logs:
            print(info["logs"], end="")
        return 0
    rows = D.list_jobs(args.address, everything=args.all)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"jobs at {args.address}")
    for col in ("submission id", "status", "spec", "message"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["submission_id"], r["status"], r["spec"], r["message"][:80])
    Console(width=160).print(table)
    return 0


# ---------------------------------------------------------------------------- parser
def register_commands(sub) -> None:
    p = sub.add_parser("sweep", help="run a grid x seeds of a spec as Ray tasks; rank the grid points",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Each trial is the spec with one grid point and one seed applied; its spec "
                                   "hash is its identity and names its run directory.\nExample:\n  multigrain "
                                   "sweep SPEC --grid 'trainer.optimizer.lr=[1e-3,3e-3]' --seeds 3")
    _spec_args(p)
    p.add_argument("--grid", action="append", default=[], metavar="KEY.PATH=[V1,V2,...]",
                   help="values of one spec key (a JSON list); repeat for a product grid")
    p.add_argument("--seeds", type=int, default=1, help="seeds per grid point: the spec's seed, +1, ... (default 1)")
    p.add_argument("--address", help="Ray cluster address HOST:6379 (default: start Ray in this process)")
    p.add_argument("--resources", metavar="JSON",
                   help='Ray options per trial, e.g. \'{"num_cpus":1,"num_gpus":0.5}\' (default: 1 CPU, and 1 GPU '
                        'when the cluster has GPUs unless trainer.cuda_device is -1)')
    p.add_argument("--resume", action="store_true",
                   help="skip trials whose spec hash has a FINISHED run in MLflow; continue the others")
    p.add_argument("--max-retries", type=int, default=2, help="retries of a trial whose worker dies (default 2)")
    p.add_argument("--runs-root", default="runs/sweeps", help="trial run dirs: RUNS_ROOT/<spec name>/<hash8>")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default sqlite:///mlruns.db)")
    p.set_defaults(func=_with_sigterm(cmd_sweep))

    p = sub.add_parser("serve", help="serve archives over HTTP with Ray Serve: POST /predict/<name>")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--replicas", type=int, default=1, help="replicas per model (default 1)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--num-cpus", type=float, default=1.0, help="CPUs per replica")
    p.add_argument("--num-gpus", type=float, help="GPUs per replica (default 1 when the cluster has GPUs)")
    p.add_argument("--address", help="Ray cluster address (default: Ray in this process)")
    p.set_defaults(func=_with_sigterm(cmd_serve))

    p = sub.add_parser("evaluate-all", help="evaluate archives on data files with a pool of Ray actors; "
                                            "record leaderboard rows in MLflow")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("--data", nargs="+", required=True, metavar="PATH", help="data files in the archives' format")
    p.add_argument("--actors", type=int, help="evaluator actors (default: one per archive, as resources allow)")
    p.add_argument("--num-cpus", type=float, default=1.0)
    p.add_argument("--num-gpus", type=float, help="GPUs per actor (default 1 when the cluster has GPUs)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--address")
    p.add_argument("--tracking-uri")
    p.add_argument("--no-tracking", action="store_true", help="print only; log nothing to MLflow")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_with_sigterm(cmd_evaluate_all))

    p = sub.add_parser("submit", help="train a spec as a Ray job on a cluster (idempotent per spec hash)")
    _spec_args(p)
    p.add_argument("--address", required=True, help="the head's Jobs API, e.g. http://HEAD:8265")
    p.add_argument("-s", "--serialization-dir", help="run directory on the cluster (default runs/jobs/<spec>-<hash8>)")
    p.add_argument("--tracking-uri", help="MLflow URI the job logs to (a shared server on a real cluster)")
    p.add_argument("--runtime-env", metavar="YAML", help="runtime env file, e.g. ray_cluster/runtime_env.yaml")
    p.add_argument("--working-dir", help="local directory uploaded as the job's working directory")
    p.add_argument("--cwd", help="directory on the cluster the job runs in, e.g. ~/multigrain (the checkout the "
                                 "cluster YAMLs sync, where the specs' relative data paths hold)")
    p.add_argument("--num-cpus", type=float, default=1.0, help="CPUs reserved for the job")
    p.add_argument("--num-gpus", type=float,
                   help="GPUs reserved for the job (default 1 if trainer.cuda_device >= 0, else 0)")
    p.add_argument("--retry-failed", action="store_true", help="resubmit when the earlier job FAILED or was STOPPED")
    p.add_argument("--wait", action="store_true", help="wait for the job, print its logs, exit 0 iff it succeeded")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("jobs", help="list multigrain jobs of a cluster, or show one (with --logs)")
    p.add_argument("id", nargs="?", help="a submission id (multigrain-<hash16>)")
    p.add_argument("--address", required=True, help="the head's Jobs API, e.g. http://HEAD:8265")
    p.add_argument("--logs", action="store_true")
    p.add_argument("--all", action="store_true", help="list every job of the cluster, not only multigrain's")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_jobs)
