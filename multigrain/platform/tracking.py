"""MLflow tracking and leaderboards.

Default store: ``sqlite:///mlruns.db`` in the working directory (MLflow 3's file store is
deprecated), overridden by ``--tracking-uri`` or ``MLFLOW_TRACKING_URI``. One experiment per
task/dataset (``ner/resume``); one run per training, tagged ``task``, ``dataset``, ``model``,
``encoder``, ``spec_hash``, ``git_commit`` and ``leaderboard=true``.

Only one process writes a given store: the CLI logs live from the training process; Ray
workers hand their result to the driver, which ``replay``s it.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

DEFAULT_DB = "mlruns.db"


def tracking_uri(explicit: Optional[str] = None) -> str:
    if explicit:
        return explicit
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path.cwd() / DEFAULT_DB}"


def git_commit(cwd: Optional[str] = None) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
        commit = out.stdout.strip()
        if out.returncode != 0 or not commit:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def flatten(spec: Any, prefix: str = "") -> dict[str, str]:
    """``{"model": {"encoder": {"type": "x"}}}`` -> ``{"model.encoder.type": "x"}``."""
    out: dict[str, str] = {}
    if isinstance(spec, dict) and spec:
        for k, v in spec.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(spec, list) and spec and any(isinstance(v, (dict, list)) for v in spec):
        for i, v in enumerate(spec):
            out.update(flatten(v, f"{prefix}.{i}"))
    else:
        text = spec if isinstance(spec, str) else json.dumps(spec, ensure_ascii=False)
        out[prefix] = text[:6000]
    return out


def experiment_name(ident: dict) -> str:
    return f"{ident['task']}/{ident['dataset']}"


def sqlite_path(uri: str) -> Optional[Path]:
    """The database file of a ``sqlite:///`` URI (None for other stores)."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def open_store(uri: str, create: bool = True):
    """A client of the store at ``uri``. A SQLite store is created (tables and migrations) once,
    under a file lock beside it, before any writer uses it: trainings started together on a fresh
    store do not race to create it. Its folder must exist; with ``create`` false (read-only
    commands) a missing store is None and nothing is created."""
    import fcntl

    import mlflow
    from mlflow.tracking import MlflowClient

    from multigrain.platform.errors import ConfigurationError

    db = sqlite_path(uri)
    if db is not None:
        if not db.parent.is_dir():
            raise ConfigurationError(f"tracking URI {uri}: the folder {db.parent} does not exist")
        if not db.exists() and not create:
            return None
    mlflow.set_tracking_uri(uri)
    if db is None:
        return MlflowClient(tracking_uri=uri)
    with open(db.with_name(db.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # creates or migrates the store now, inside the lock
    return client


def _experiment_id(client, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # created concurrently
        return client.get_experiment_by_name(name).experiment_id


class RunLogger:
    """Logs one training run: ``start`` -> ``log_epoch``* -> ``finish`` (or ``fail``)."""

    def __init__(self, uri: Optional[str] = None):
        self.uri = tracking_uri(uri)
        self.client = None
        self.run_id: Optional[str] = None

    def start(self, spec: dict, ident: dict, digest: str, run_dir: str, leaderboard: bool = True,
              commit: Optional[str] = None) -> str:
        """``commit``: the git commit that trained the run (default: this checkout's)."""
        from mlflow.entities import Param

        self.client = open_store(self.uri)
        exp_id = _experiment_id(self.client, experiment_name(ident))
        tags = {"task": ident["task"], "dataset": ident["dataset"], "model": ident["model"],
                "encoder": ident["encoder"], "spec_hash": digest, "git_commit": commit or git_commit(),
                "leaderboard": "true" if leaderboard else "false", "run_dir": str(run_dir),
                "mlflow.runName": f"{ident['model']}-{ident['encoder']}-{digest[:8]}"}
        run = self.client.create_run(exp_id, tags=tags)
        self.run_id = run.info.run_id
        params = [Param(k[:250], v) for k, v in sorted(flatten(spec).items())]
        for i in range(0, len(params), 100):
            self.client.log_batch(self.run_id, params=params[i:i + 100], synchronous=True)
        return self.run_id

    def continue_run(self, run_id: str) -> bool:
        """Log into an earlier MLflow run of this run directory (a resumed training) instead of
        starting another; False when the store does not hold it."""
        from mlflow.exceptions import MlflowException

        self.client = open_store(self.uri)
        try:
            self.client.get_run(run_id)
        except MlflowException:
            return False
        self.client.update_run(run_id, status="RUNNING")
        self.run_id = run_id
        return True

    def logged_epochs(self) -> set[int]:
        """Epochs whose training loss the run already holds."""
        return {m.step for m in self.client.get_metric_history(self.run_id, "train_loss")}

    def end(self, status: str) -> None:
        """``KILLED`` (stopped, resumable) or ``FAILED``."""
        if self.client and self.run_id:
            self.client.set_terminated(self.run_id, status)

    def log_epoch(self, epoch: int, record: dict) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, epoch) for k, v in record.items()
                   if k != "epoch" and isinstance(v, (int, float)) and not isinstance(v, bool)]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def finish(self, result: dict, run_dir: str) -> None:
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        metrics = []
        # per-epoch curves are validation_*; the best checkpoint's scores are best_validation_*
        for split, prefix in (("validation", "best_validation"), ("test", "test")):
            for k, v in (result.get(split) or {}).items():
                metrics.append(Metric(f"{prefix}_{k}", float(v), now, 0))
        for k in ("training_seconds", "seconds", "epochs_completed", "best_epoch"):
            if isinstance(result.get(k), (int, float)):
                metrics.append(Metric(k, float(result[k]), now, 0))
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)
        key = result.get("leaderboard_metric")
        if key:
            self.client.log_batch(self.run_id, tags=[RunTag("leaderboard_metric", f"test_{key}")])
        run_dir = Path(run_dir)
        for name in ("config.json", "metrics.json"):
            if (run_dir / name).exists():
                self.client.log_artifact(self.run_id, str(run_dir / name))
        if result.get("test_report"):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "test_report.json"
                path.write_text(json.dumps(result["test_report"], indent=2, ensure_ascii=False))
                self.client.log_artifact(self.run_id, str(path))
        self.client.set_terminated(self.run_id, "FINISHED")

    def fail(self) -> None:
        self.end("FAILED")


def logged_run(result: dict, uri: Optional[str] = None) -> Optional[str]:
    """The id of a finished MLflow run already holding ``result`` (same spec hash and run dir), if any."""
    client = open_store(tracking_uri(uri))
    exp = client.get_experiment_by_name(experiment_name(result))
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.spec_hash = '{result['spec_hash']}'")
    return next((r.info.run_id for r in runs
                 if r.data.tags.get("run_dir") == result["run_dir"] and r.info.status == "FINISHED"), None)


def unfinished_run(uri: str, ident: dict, digest: str, run_dir: str) -> Optional[str]:
    """The latest MLflow run of ``run_dir`` with this spec hash that did not finish, if any."""
    client = open_store(uri, create=False)
    exp = client.get_experiment_by_name(experiment_name(ident)) if client is not None else None
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.spec_hash = '{digest}' and "
                                                                 f"attributes.status != 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    return next((r.info.run_id for r in runs if r.data.tags.get("run_dir") == run_dir), None)


def replay(result: dict, spec: dict, uri: Optional[str] = None) -> str:
    """Log a finished run from its result (what a Ray worker returned to the driver, or the
    metrics.json of a run trained elsewhere), tagged with the commit recorded where it trained;
    where none was recorded, or the trainer had no git checkout (a Ray working_dir), this one's."""
    logger = RunLogger(uri)
    ident = {k: result[k] for k in ("task", "dataset", "model", "encoder")}
    trained_at = result.get("git_commit")
    run_id = logger.start(spec, ident, result["spec_hash"], result["run_dir"],
                          commit=trained_at if trained_at and trained_at != "unknown" else None)
    for record in result.get("history", []):
        logger.log_epoch(record["epoch"], record)
    logger.finish(result, result["run_dir"])
    return run_id


# ---------------------------------------------------------------------------- leaderboards
def leaderboard(task: str, uri: Optional[str] = None, metric: Optional[str] = None) -> list[dict]:
    """Best finished run per spec hash, ranked. ``task`` is an experiment (``ner/resume``) or a
    task prefix (``ner``: every ``ner/*`` experiment)."""
    client = open_store(tracking_uri(uri), create=False)
    if client is None:
        return []
    from mlflow.entities import ViewType

    exps = [e for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)
            if e.name == task or e.name.startswith(task.rstrip("/") + "/")]
    if not exps:
        return []
    runs = []
    token = None
    while True:
        page = client.search_runs([e.experiment_id for e in exps],
                                  filter_string="tags.leaderboard = 'true' and attributes.status = 'FINISHED'",
                                  max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            break
    names = {e.experiment_id: e.name for e in exps}
    best: dict[tuple, dict] = {}
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        key = metric or tags.get("leaderboard_metric", "test_f1")
        if key not in metrics:
            continue
        row = {"experiment": names[run.info.experiment_id], "model": tags.get("model", ""),
               "encoder": tags.get("encoder", ""), "metric": key, "value": metrics[key],
               "spec_hash": tags.get("spec_hash", ""), "run_id": run.info.run_id,
               "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.info.start_time / 1000)),
               "git_commit": tags.get("git_commit", "")}
        ident = (row["experiment"], row["spec_hash"])
        if ident not in best or row["value"] > best[ident]["value"]:
            best[ident] = row
    rows = sorted(best.values(), key=lambda r: (r["experiment"], -r["value"]))
    rank, last_exp = 0, None
    for row in rows:
        rank = rank + 1 if row["experiment"] == last_exp else 1
        last_exp = row["experiment"]
        row["rank"] = rank
    return rows


def print_leaderboard(task: str, rows: list[dict], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    import sys

    console = console or (Console() if sys.stdout.isatty() else Console(width=160))
    if not rows:
        console.print(f"leaderboard {task}: no finished runs tagged leaderboard=true")
        return
    table = Table(title=f"leaderboard: {task}")
    for col in ("rank", "experiment", "model", "encoder", "metric", "value", "spec hash", "date"):
        table.add_column(col, justify="right" if col in ("rank", "value") else "left")
    for r in rows:
        table.add_row(str(r["rank"]), r["experiment"], r["model"], r["encoder"], r["metric"],
                      f"{100 * r['value']:.2f}" if r["value"] <= 1.0 else f"{r['value']:.2f}",
                      r["spec_hash"][:12], r["date"])
    console.print(table)
