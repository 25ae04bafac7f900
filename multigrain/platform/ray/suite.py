"""Running a suite's runs (``platform/suite.py``) as Ray tasks: each placed by its own resources
(fractional GPUs pack several on one GPU), a finished run reused, an unfinished one resumed from
its ``last.pt``, a task whose worker died retried (``max_retries``), every run logged to MLflow
from this driver (workers never write the store) with its suite tags (``suite.run_tags``: spec
name, configuration, overrides, epochs, device, date; ``logged_runs`` finds and tags a plan's
finished runs without Ray, for the results tables). Two suites on one store never train one run
twice: a task holds a blocking lock on its run directory (``.<run dir>.suite-lock``) while it
trains, so the second waits, then finds the run finished and reuses it.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Optional

from multigrain.platform.ray.cluster import cluster_resources, monitored_rounds
from multigrain.platform.suite import SuiteRun

#: seconds between progress lines when nothing changes (CI needs a line at least every 30 s)
PROGRESS_EVERY = 25.0


def _suite_task(spec: dict, run_dir: str, index: int, monitor, cwd: str, hide_gpus: bool, included: list,
                *after) -> dict:
    """What a worker runs for one suite run: wait for the run directory's suite lock, then train
    or reuse it (``sweep._trial_task``). ``after``: the results of the runs it reads (``run_of``),
    which Ray hands over only when they have finished."""
    import fcntl

    from multigrain.platform.ray.sweep import _trial_task
    from multigrain.platform.weights import open_lock

    if os.path.isdir(cwd):
        os.chdir(cwd)
    path = Path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_lock(path.parent / f".{path.name}.suite-lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or by the kernel if we die
        return _trial_task(spec, run_dir, index, monitor, cwd, hide_gpus, included)


class Progress:
    """Per entry: done / running / queued, elapsed and an estimate; a line when something changed
    or every ``PROGRESS_EVERY`` seconds. Under it, each running run's latest progress line from
    its worker (``report``), once each: a long epoch shows that the training itself moves."""

    def __init__(self, runs: list[SuiteRun], print_line: Callable[[str], None] = print):
        self.runs = runs
        self.by_index = {r.index: r for r in runs}
        self.print_line = print_line
        self.started = time.monotonic()
        self.last_line = 0.0
        self.last_text = ""
        self.shown: dict[int, str] = {}

    def report(self, states: dict[int, str], snapshot: dict[int, dict]) -> None:
        """The running runs' progress lines that are new since the last call."""
        for index, rec in sorted(snapshot.items()):
            line = rec.get("line")
            if line and states.get(index) == "running" and self.shown.get(index) != line and index in self.by_index:
                self.shown[index] = line
                self.print_line(f"  {self.by_index[index].label}: {line}")

    def update(self, states: dict[int, str], force: bool = False) -> None:
        now = time.monotonic()
        parts = []
        entries: dict[str, list[str]] = {}
        for r in self.runs:
            entries.setdefault(r.entry, []).append(states.get(r.index, "queued"))
        for entry, s in entries.items():
            done = sum(x in ("finished", "reused", "failed") for x in s)
            parts.append(f"{entry}: {done}/{len(s)} done, {s.count('running')} running, {s.count('queued')} queued"
                         + (f", {s.count('failed')} failed" if "failed" in s else ""))
        total = len(states) and sum(x in ("finished", "reused", "failed") for x in states.values())
        trained = sum(x == "finished" for x in states.values())
        elapsed = now - self.started
        left = len(self.runs) - total
        estimate = f", about {elapsed / trained * left / 60:.0f} min left" if trained and left else ""
        text = "; ".join(parts)
        if force or text != self.last_text or now - self.last_line >= PROGRESS_EVERY:
            self.print_line(f"suite [{elapsed / 60:.1f} min{estimate}] {text}")
            self.last_line, self.last_text = now, text


def reuse_finished(runs: list[SuiteRun], uri: Optional[str] = None, tracking: bool = True,
                   print_line: Callable[[str], None] = print) -> dict[int, dict]:
    """The runs already finished in their directories, read here (no Ray) and logged to MLflow
    unless a run of their spec hash is there already: index -> {"state": "reused", "result", "run_id"}."""
    from multigrain.platform.ray.sweep import finished_runs

    results = {r.index: r.result() for r in runs}
    done = [r for r in runs if results[r.index] is not None]
    logged = finished_runs(done, uri) if tracking and done else {}
    outcome = {}
    for r in done:
        outcome[r.index] = {"state": "reused", "result": results[r.index]}
        if tracking:
            outcome[r.index]["run_id"] = _log(r, outcome[r.index]["result"], logged, uri, print_line)
    return outcome


def run_suite(runs: list[SuiteRun], max_retries: int = 2, uri: Optional[str] = None, tracking: bool = True,
              include_packages: tuple = (), print_line: Callable[[str], None] = print,
              poll: float = 0.5, outcome: Optional[dict[int, dict]] = None) -> dict[int, dict]:
    """Train (or resume) every run not in ``outcome`` (``reuse_finished``'s) as a Ray task; returns
    ``outcome`` with every run: index -> {"state", "result" or "error", "run_id"}."""
    import ray

    from multigrain.platform.plugins import travelling
    from multigrain.platform.ray.sweep import SweepMonitor, finished_runs

    outcome = dict(outcome or {})
    todo = [r for r in runs if r.index not in outcome]
    logged = finished_runs(todo, uri) if tracking and todo else {}
    monitor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(SweepMonitor).remote()
    has_gpus = cluster_resources().get("GPU", 0) > 0
    included = travelling(include_packages)
    cwd = os.getcwd()
    states = {i: o["state"] for i, o in outcome.items()}
    pending = {}
    submitted = {}
    for r in todo:  # a run after the runs it reads (plan orders them so)
        hide = has_gpus and not r.options.get("num_gpus")
        options = {**r.options, **({"max_calls": 1} if hide else {})}
        task = ray.remote(max_retries=max_retries, retry_exceptions=False, **options)(_suite_task)
        after = [submitted[n] for n in r.needs if n in submitted]
        ref = submitted[r.index] = task.remote(r.spec, r.run_dir, r.index, monitor, cwd, hide, included, *after)
        pending[ref] = r
        states[r.index] = "queued"
    progress = Progress(runs, print_line)
    progress.update(states, force=True)
    for ended, snapshot in monitored_rounds(pending, monitor, poll):
        for r, result, error in ended:
            if error is not None:
                states[r.index], outcome[r.index] = "failed", {"state": "failed", "error": error}
                print_line(f"failed: {r.label}: {error}")
                continue
            states[r.index] = "finished"
            outcome[r.index] = {"state": "finished", "result": result}
            if tracking:
                outcome[r.index]["run_id"] = _log(r, result, logged, uri, print_line)
        for index in snapshot:
            if states.get(index) == "queued":
                states[index] = "running"
        progress.update(states)
        progress.report(states, snapshot)
    progress.update(states, force=True)
    return outcome


def logged_runs(runs: list[SuiteRun], uri: Optional[str] = None,
                print_line: Callable[[str], None] = print) -> dict[int, str]:
    """index -> MLflow run id of every finished run of ``runs`` (no Ray, nothing trained), each
    tagged as its suite run (``suite.run_tags``): a run finished in its directory is logged unless
    it is already (``reuse_finished``); otherwise the store's latest finished run of its spec hash,
    trained elsewhere (another machine's, imported from a board), if there is one."""
    from multigrain.platform import tracking
    from multigrain.platform.ray.sweep import finished_runs

    ids = {i: o["run_id"] for i, o in reuse_finished(runs, uri, True, print_line).items() if o.get("run_id")}
    rest = [r for r in runs if r.index not in ids]
    stored = finished_runs(rest, uri) if rest else {}
    if stored:
        client = tracking.open_store(tracking.tracking_uri(uri))
        for r in rest:
            if r.spec_hash in stored:
                run = stored[r.spec_hash]
                ids[r.index] = run.info.run_id
                tag_run(client, r, run.info.run_id, {}, (run.info.end_time or run.info.start_time) / 1000)
    return ids


def tag_run(client, r: SuiteRun, run_id: str, result: dict, when: Optional[float] = None) -> None:
    """The suite's tags (``suite.run_tags``) on a run and on its rows of other test sets; a ``note``,
    ``device`` or ``date`` the run has already (written where it trained) is kept."""
    from mlflow.entities import RunTag

    from multigrain.platform.paths import same_folder
    from multigrain.platform.suite import run_tags

    had = client.get_run(run_id).data.tags
    tags = [RunTag(k, v) for k, v in run_tags(r, result, when).items() if k not in ("note", "device", "date") or
            k not in had]
    client.log_batch(run_id, tags=tags, synchronous=True)
    run_dir = had.get("run_dir")
    experiments = [e.experiment_id for e in client.search_experiments()]
    rows = client.search_runs(experiments, filter_string=f"tags.spec_hash = '{r.spec_hash}' and "
                                                         f"tags.evaluated_on LIKE '%'") if experiments else []
    for row in rows:
        if same_folder(row.data.tags.get("run_dir"), run_dir):
            client.log_batch(row.info.run_id, tags=tags, synchronous=True)


def _log(r: SuiteRun, result: dict, logged: dict, uri, print_line) -> Optional[str]:
    """Log a run to MLflow once (a run that this or another suite logged before is not logged
    again), tagged as a suite run (its suite tag is the leaderboard's ``config``); returns its id."""
    from multigrain.platform import tracking as mlflow_tracking

    try:  # named after its spec file (a run directory's name carries the tag)
        if r.spec_hash in logged:
            run_id = logged[r.spec_hash].info.run_id
        else:
            run_id = mlflow_tracking.replay({**result, "source": r.spec_path}, r.spec, uri)
        tag_run(mlflow_tracking.open_store(mlflow_tracking.tracking_uri(uri)), r, run_id, result)
        return run_id
    except Exception as e:  # the run directory still holds the result: `multigrain log` can add it later
        print_line(f"warning: {r.label}: trained, but logging to MLflow failed: {e}")
        return None
