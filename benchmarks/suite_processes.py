"""A suite's runs as local processes, without Ray: what ``benchmarks/device_session.sh`` runs on the
lent GPU machine in place of ``multigrain suite``. That machine's image has no Ray and no MLflow, and
Ray's wheel (79 MB for CPython 3.12) cannot travel in a call (64 MiB in all, data included).

    python benchmarks/suite_processes.py SUITE [--only PATTERN] [--seeds N ...] [--runs-dir DIR]
        [-o KEY.PATH=VALUE ...] [--logs DIR] [--seconds S] [--every S] [--extend]

The plan is the suite's own (``platform/suite.plan``): the same runs, run directories and spec
hashes as ``multigrain suite`` with the same arguments, so ``mt_results.py --suite`` and
``results_tables.py --suite`` read them, and ``multigrain log`` logs them here afterwards. A
finished run is reused; every other run starts at once in a process of its own (all of them share
the machine, as entries asking for a GPU fraction share the GPU under Ray), with its entry's
``cpus`` as ``OMP_NUM_THREADS``, and trains or resumes as a suite task does (``Run.train_or_reuse``);
with ``--extend`` a new run starts from a copy of a finished sibling with fewer epochs, as ``multigrain
train`` of a longer spec does, and trains the missing epochs alone.
Each run's output goes to ``LOGS/<run directory name>.log``. A progress line at least every
``--every`` seconds (default 25) gives each running run's latest line. ``--seconds``: at that age
every run still going gets SIGTERM, SIGKILL 20 s later, and counts as stopped (its ``last.pt``, if
an epoch ended, lets a later call resume it). Runs with ``run_of`` ext-vars (a run reading another's
directory) are not supported here and are refused.

Exit status: 0 when every run finished, 1 when one failed or was stopped, 2 for a bad suite or
arguments (one message, nothing started).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: a child: train or resume one planned run as a suite task does (no Ray Train: one process)
CHILD = ("import json, sys\n"
         "from multigrain.platform.runs import Run\n"
         "spec = json.loads(open(sys.argv[1], encoding='utf-8').read())\n"
         "Run(spec, sys.argv[2]).train_or_reuse(extend_siblings=sys.argv[3] == 'extend')\n")
GRACE_S = 20.0


def last_line(path: Path, limit: int = 4096) -> str:
    """The last non-empty line of a log (its final ``limit`` bytes), or ''."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - limit))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def start(run, logs: Path, extend: bool = False) -> subprocess.Popen:
    name = Path(run.run_dir).name
    spec_file = logs / f"{name}.spec.json"
    spec_file.write_text(json.dumps(run.spec), encoding="utf-8")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cpus = run.options.get("num_cpus")
    if cpus:
        env["OMP_NUM_THREADS"] = str(max(1, int(cpus)))
    with open(logs / f"{name}.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-c", CHILD, str(spec_file), run.run_dir, "extend" if extend else "-"],
                                cwd=os.getcwd(), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop(procs: dict) -> None:
    """SIGTERM to every process still running, SIGKILL after ``GRACE_S``."""
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    for proc in procs.values():
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_all(runs: list, logs: Path, seconds: float | None, every: float, print_line=print,
            extend: bool = False) -> dict[int, dict]:
    """Train every run not finished yet, side by side; ``outcome`` as ``multigrain suite`` gives it:
    index -> {"state": finished | failed | stopped, "result" or "error"}."""
    outcome = {r.index: {"state": "finished", "result": result, "reused": True}
               for r in runs if (result := r.result()) is not None}
    todo = [r for r in runs if r.index not in outcome]
    print_line(f"{len(runs)} runs: {len(todo)} to train or resume, {len(outcome)} finished already")
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    procs = {r.index: start(r, logs, extend) for r in todo}
    by_index = {r.index: r for r in todo}
    last_report = started
    try:
        while any(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
            now = time.monotonic()
            if seconds is not None and now - started >= seconds:
                print_line(f"{seconds:.0f} s are up: stopping the runs still going")
                stop(procs)
                break
            if now - last_report >= every:
                last_report = now
                going = [i for i, p in procs.items() if p.poll() is None]
                print_line(f"{now - started:.0f} s: {len(going)} running, {len(procs) - len(going)} ended")
                for i in going:
                    latest = last_line(logs / f"{Path(by_index[i].run_dir).name}.log") or "(no output yet)"
                    print_line(f"  {by_index[i].label}: {latest}")
    except BaseException:
        stop(procs)
        raise
    for i, proc in procs.items():
        r = by_index[i]
        result = r.result()
        if result is not None:
            outcome[i] = {"state": "finished", "result": result}
        elif proc.returncode is None or proc.returncode < 0:
            outcome[i] = {"state": "stopped", "error": f"stopped (see {logs / Path(r.run_dir).name}.log)"}
        else:
            log = logs / f"{Path(r.run_dir).name}.log"
            outcome[i] = {"state": "failed", "error": f"exit {proc.returncode}: {last_line(log)} ({log})"}
    print_line(f"{time.monotonic() - started:.0f} s in all")
    return outcome


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("suite")
    p.add_argument("--only", nargs="+", metavar="PATTERN")
    p.add_argument("--seeds", type=int, nargs="+", metavar="SEED")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--logs", help="where each run's output goes (default RUNS_DIR/logs)")
    p.add_argument("--seconds", type=float, help="stop the runs still going at this age")
    p.add_argument("--every", type=float, default=25.0, help="seconds between progress lines (default 25)")
    p.add_argument("--extend", action="store_true",
                   help="a new run starts from a copy of its finished shorter sibling (the same spec with fewer "
                        "epochs) and trains the missing epochs alone")
    args = p.parse_args(argv)
    from multigrain.platform import suite as suites
    from multigrain.platform.commands.suite import summary_lines
    from multigrain.platform.errors import MultigrainError, SpecError
    from multigrain.platform.specs import repeated_overrides

    try:
        if problems := repeated_overrides(args.override):  # the command line's own: its entries' may layer
            raise SpecError(problems, args.suite)
        definition = suites.load_suite(args.suite)
        runs = suites.plan(args.suite, definition, args.runs_dir, args.only, seeds=args.seeds,
                           overrides=args.override)
    except MultigrainError as e:
        print(f"error: {e}", file=sys.stderr)  # as `multigrain suite` says it (the message names the file)
        return 2
    readers = [r.label for r in runs if r.needs]
    if readers:
        print(f"{args.suite}: runs that read other runs' directories (run_of) need multigrain suite: "
              f"{', '.join(readers)}", file=sys.stderr)
        return 2
    if not runs:
        print(f"{args.suite}: no run matches", file=sys.stderr)
        return 2
    # a SIGTERM (`timeout`) ends the runs too: each is in a session of its own, which no signal to ours reaches
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    outcome = run_all(runs, Path(args.logs or Path(args.runs_dir) / "logs"), args.seconds, args.every,
                      lambda line: print(line, flush=True), args.extend)
    for line in summary_lines(runs, outcome):
        print(line)
    return 0 if all(o["state"] == "finished" for o in outcome.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
