"""The portable leaderboard file: finished leaderboard runs (metrics, learning curves, tags with
their spec hashes, params) as one JSON file that merges the runs of several machines into one
store. ``multigrain leaderboard --export FILE`` writes it (whole or not at all), ``--import FILE``
adds the runs the store does not hold yet (by record id: importing twice changes nothing)::

    {"format": "multigrain-leaderboard", "version": 1, "runs": [{"id", "experiment", "name",
     "status", "start_time", "end_time", "tags", "metrics", "params", "history"}, ...]}
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Optional

from multigrain.platform.errors import ConfigurationError

FORMAT, VERSION = "multigrain-leaderboard", 1
STATUSES = ("FINISHED", "FAILED", "KILLED")


def board(recs: list[dict]) -> dict:
    runs = [{k: v for k, v in r.items() if k != "run_id"} for r in recs]
    return {"format": FORMAT, "version": VERSION,
            "runs": sorted(runs, key=lambda r: (r["experiment"], r["start_time"] or 0, r["id"]))}


def dumps(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def readable_mode() -> int:
    """The mode a new file gets here (mkstemp's are private)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_board(path: str | Path, recs: list[dict]) -> None:
    """Write the records to ``path`` through a temporary file beside it (never half-written)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise ConfigurationError(f"{path}: the folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(dumps(board(recs)))
        os.chmod(tmp, readable_mode())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _check_run(run, where: str) -> None:
    def fail(what: str):
        raise ConfigurationError(f"{where}: {what}")

    if not isinstance(run, dict):
        fail("expected an object")
    for key in ("id", "experiment", "name"):
        if not isinstance(run.get(key), str) or (key != "name" and not run[key]):
            fail(f"{key}: expected a non-empty string" if key != "name" else "name: expected a string")
    if run.get("status") not in STATUSES:
        fail(f"status: expected one of {', '.join(STATUSES)}, got {json.dumps(run.get('status'))}")
    for key in ("start_time", "end_time"):
        value = run.get(key)
        if not (value is None and key == "end_time") and (isinstance(value, bool) or not isinstance(value, int)):
            fail(f"{key}: expected milliseconds (a whole number), got {json.dumps(value)}")
    for key in ("tags", "params"):
        items = run.get(key, {})
        if not isinstance(items, dict) or not all(isinstance(v, str) for v in items.values()):
            fail(f"{key}: expected an object of strings")

    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    metrics = run.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        fail("metrics: expected an object of numbers (a run with no metrics ranks nowhere)")
    for name, value in metrics.items():
        if not number(value):
            fail(f"metrics.{name}: expected a number, got {json.dumps(value)}")
    history = run.get("history", {})
    if not isinstance(history, dict):
        fail("history: expected an object")
    for name, points in history.items():
        if not isinstance(points, list) or not all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], int) and number(p[1]) for p in points):
            fail(f"history.{name}: expected [[epoch, value], ...]")


def read_board(path: str | Path) -> list[dict]:
    """The runs of a portable leaderboard file, every one checked before any is used."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ConfigurationError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ConfigurationError(f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except OSError as e:
        raise ConfigurationError(f"{path}: cannot be read ({e.strerror})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigurationError(f"{path}: not a multigrain leaderboard file (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise ConfigurationError(f"{path}: version {json.dumps(data.get('version'))}; this multigrain reads "
                                 f"version {VERSION}")
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise ConfigurationError(f"{path}: runs: expected a list")
    seen = set()
    for i, run in enumerate(runs):
        _check_run(run, f"{path}: runs[{i}]" + (f" (id {run['id']})" if isinstance(run, dict) and
                                                 isinstance(run.get("id"), str) else ""))
        if run["id"] in seen:
            raise ConfigurationError(f"{path}: runs[{i}]: id {run['id']} appears twice")
        seen.add(run["id"])
    return runs


def import_runs(client, runs: list[dict]) -> tuple[int, int]:
    """Add the runs the store does not hold (by id); (imported, already there). A run whose
    writing fails is deleted again (its id with it), so a later import adds it whole."""
    from mlflow.entities import Metric, Param

    from multigrain.platform.records import known_ids
    from multigrain.platform.tracking import experiment_id

    known = known_ids(client)
    added = 0
    for run in runs:
        if run["id"] in known:
            continue
        exp_id = experiment_id(client, run["experiment"])
        tags = {**run.get("tags", {}), "mlflow.runName": run["name"], "portable_id": run["id"]}
        created = client.create_run(exp_id, start_time=run["start_time"], tags=tags)
        run_id = created.info.run_id
        try:
            when = run.get("end_time") or run["start_time"]
            history = run.get("history", {})
            metrics = [Metric(k, float(v), when, step) for k, points in history.items() for step, v in points]
            metrics += [Metric(k, float(v), when, 0) for k, v in run["metrics"].items() if k not in history]
            params = [Param(k, v) for k, v in sorted(run.get("params", {}).items())]
            for i in range(0, max(len(metrics), len(params)), 100):
                client.log_batch(run_id, metrics=metrics[i:i + 100], params=params[i:i + 100], synchronous=True)
            if history:
                _log_curves(client, run_id, history, run.get("tags", {}))
            client.set_terminated(run_id, run["status"], end_time=run.get("end_time"))
        except BaseException:
            client.delete_run(run_id)
            raise
        known.add(run["id"])
        added += 1
    return added, len(runs) - added


def _log_curves(client, run_id: str, history: dict, tags: dict) -> None:
    """The imported run's learning curves, drawn as its own training drew them."""
    from multigrain.platform.artifacts import plot_curves

    lb: Optional[str] = tags.get("leaderboard_metric")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "learning_curves.json").write_text(json.dumps(history, indent=2), encoding="utf-8")
        plot_curves({"run": history}, Path(tmp) / "learning_curves.png", lb[len("test_"):] if lb else None)
        for name in ("learning_curves.json", "learning_curves.png"):
            client.log_artifact(run_id, str(Path(tmp) / name))
