"""The portable leaderboard file: finished leaderboard runs (metrics, learning curves, tags with
their spec hashes, params) as one JSON file that merges the runs of several machines into one
store. ``multigrain leaderboard --export FILE`` writes it (whole or not at all), ``--import FILE``
adds the runs the store does not hold yet (by record id: importing twice changes nothing)::

    {"format": "multigrain-leaderboard", "version": 1, "runs": [{"id", "experiment", "name",
     "status", "start_time", "end_time", "tags", "metrics", "params", "history"}, ...]}

A file that is no regular file (a FIFO, a device), or larger than ``MAX_BYTES``, is refused
unread; a run with more than ``MAX_POINTS`` curve points is refused before the store is touched.
The import logs in batches as large as MLflow takes, with progress lines (``progress.Stage``).

A metric that is no finite number (a diverged training's NaN loss) is written as the string
``"NaN"``, ``"Infinity"`` or ``"-Infinity"``: the file stays standard JSON and imports whole.
"""
from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Optional

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.jsonio import JsonTextError, loads
from multigrain.platform.progress import Stage
from multigrain.platform.store_names import (INT64_MAX, KEY_MAX, PARAM_VALUE_MAX, TAG_VALUE_MAX, experiment_problem,
                                             key_problem, number_problem, shown, text_problem, whole_problem)

FORMAT, VERSION = "multigrain-leaderboard", 1
#: the largest file ``read_board`` reads (bytes): the shipped export of 263 runs is 0.9 MB; a bigger
#: file is refused before it is read (``/dev/zero`` behind a link would fill the memory)
MAX_BYTES = 64 * 1024 * 1024
STATUSES = ("FINISHED", "FAILED", "KILLED")
#: the most curve points one run of the file may have: a training logs its curves once per epoch (the
#: shipped export's longest run has 30); 100,000 import in seconds
MAX_POINTS = 100_000
#: MLflow's limits on one ``log_batch``: 1000 values in all, of them at most 100 params
BATCH, PARAMS_PER_BATCH = 1000, 100
#: tag of an imported run until all of it is written (a run that keeps it was cut short by a kill)
IMPORTING_TAG = "portable_importing"


#: how the file writes a metric that is no finite number (a diverged training's loss): JSON has no NaN
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _written(value):
    """``value`` as the file holds it: a float that is NaN or infinite as its ``NON_FINITE`` name."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return value


def board(recs: list[dict]) -> dict:
    runs = [{k: v for k, v in r.items() if k != "run_id"} for r in recs]
    for run in runs:
        run["metrics"] = {k: _written(v) for k, v in run["metrics"].items()}
        if "history" in run:
            run["history"] = {k: [[step, _written(v)] for step, v in points] for k, points in run["history"].items()}
    return {"format": FORMAT, "version": VERSION,
            "runs": sorted(runs, key=lambda r: (r["experiment"], r["start_time"] or 0, r["id"]))}


def dumps(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True, allow_nan=False) + "\n"


def readable_mode() -> int:
    """The mode a new file gets here (mkstemp's are private)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_board(path: str | Path, recs: list[dict]) -> None:
    """Write the records to ``path`` through a temporary file beside it (never half-written: a full
    disk leaves neither a temporary file nor a partial ``path``, and is one ConfigurationError).
    Through a link, the file it names is written (as a shell's ``>``); an existing path that is no
    regular file (``/dev/stdout``, a pipe, a device) is written straight to, never replaced."""
    shown, path = path, Path(os.path.realpath(path))
    if not path.parent.is_dir():
        raise ConfigurationError(f"{shown}: the folder {path.parent} does not exist")
    text = dumps(board(recs))
    if path.exists() and not path.is_file():
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise ConfigurationError(f"{shown}: cannot be written ({e.strerror or e}); it is no regular file") from None
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise ConfigurationError(f"{shown}: cannot be written ({e.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, readable_mode())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise ConfigurationError(f"{shown}: cannot be written ({e.strerror or e}); nothing was written") from None
        raise


def _check_run(run, where: str) -> None:
    """Raise one ConfigurationError (``where``: the file and row) for the first thing in ``run``
    that the store would refuse, cut, or that could write outside it."""
    def fail(what: str):
        raise ConfigurationError(f"{where}: {what}")

    if not isinstance(run, dict):
        fail("expected an object")
    for key in ("id", "experiment", "name"):
        if not isinstance(run.get(key), str) or (key != "name" and not run[key]):
            fail(f"{key}: expected a non-empty string" if key != "name" else "name: expected a string")
    for key, limit in (("id", KEY_MAX), ("name", KEY_MAX)):
        why = text_problem(run[key], limit)
        if why:
            fail(f"{key}: {why}")
    why = experiment_problem(run["experiment"])
    if why:
        fail(f"experiment: {why}")
    if run.get("status") not in STATUSES:
        fail(f"status: expected one of {', '.join(STATUSES)}, got {shown(run.get('status'))}")
    for key in ("start_time", "end_time"):
        value = run.get(key)
        why = None if value is None and key == "end_time" else whole_problem(value)
        if why:
            fail(f"{key}: milliseconds since 1970: {why}")
    for key, limit in (("tags", TAG_VALUE_MAX), ("params", PARAM_VALUE_MAX)):
        items = run.get(key, {})
        if not isinstance(items, dict):
            fail(f"{key}: expected an object of strings")
        for name, value in items.items():
            why = key_problem(name) or text_problem(value, limit)
            if why:
                fail(f"{key}.{name}: {why}" if isinstance(name, str) else f"{key}: {why}")
    metrics = run.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        fail("metrics: expected an object of numbers (a run with no metrics ranks nowhere)")
    for name, value in metrics.items():
        why = key_problem(name) or _number_problem(value)
        if why:
            fail(f"metrics.{name}: {why}" if isinstance(name, str) else f"metrics: {why}")
    history = run.get("history", {})
    if not isinstance(history, dict):
        fail("history: expected an object")
    points = sum(len(p) for p in history.values() if isinstance(p, list))
    if points > MAX_POINTS:
        fail(f"history: {points:,} curve points, more than the {MAX_POINTS:,} a run may have (a training logs "
             f"its curves once per epoch)")
    for name, points in history.items():
        why = key_problem(name)
        if why:
            fail(f"history: {why}")
        if not isinstance(points, list):
            fail(f"history.{name}: expected [[epoch, value], ...]")
        for i, point in enumerate(points):
            if not isinstance(point, list) or len(point) != 2:
                fail(f"history.{name}[{i}]: expected [epoch, value]")
            why = whole_problem(point[0], -INT64_MAX - 1) or _number_problem(point[1])
            if why:
                fail(f"history.{name}[{i}]: {why}")


def _number_problem(value) -> Optional[str]:
    """Why a metric's value in the file is none: a finite number or a ``NON_FINITE`` name is one."""
    if isinstance(value, str) and value in NON_FINITE:
        return None
    why = number_problem(value)
    if why and "finite" in why:
        return f"{why} (write NaN and infinities as \"NaN\", \"Infinity\", \"-Infinity\")"
    return why


def _notshown(text: str, error: JsonTextError) -> str:
    """Why ``text`` is no usable JSON, with the line and column of a syntax error."""
    if str(error).startswith("bad JSON"):
        try:  # parsed once more only to tell the line: its nesting is within MAX_DEPTH
            json.loads(text)
        except json.JSONDecodeError as e:
            return f"not JSON ({e.msg} at line {e.lineno} column {e.colno})"
        except RecursionError:
            pass
    return f"not usable JSON ({error})"


def _file_text(path: Path) -> bytes:
    """The bytes of ``path``, refused (one ConfigurationError) when it is no regular file (a FIFO
    would block the read forever, a device never ends, a folder is no file) or larger than
    ``MAX_BYTES``; both are checked on the open file, before any byte is read."""
    from multigrain.platform.paths import stat_problem

    # O_NONBLOCK: opening a FIFO does not wait for a writer
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    info = os.fstat(fd)
    if problem := stat_problem(info, MAX_BYTES, "leaderboard file"):
        os.close(fd)
        raise ConfigurationError(f"{path}: {problem}; " + ("refused unread" if stat.S_ISREG(info.st_mode) else
                                 "a leaderboard file is a file written by `multigrain leaderboard --export`"))
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:  # it grew after the check
        raise ConfigurationError(f"{path}: more than the {MAX_BYTES:,} bytes (64 MiB) a leaderboard file may have")
    return data


def read_board(path: str | Path) -> list[dict]:
    """The runs of a portable leaderboard file, every one checked before any is used."""
    if not str(path):  # Path("") would read the working directory
        raise ConfigurationError("--import: an empty path (name a leaderboard file)")
    path = Path(path)
    try:
        text = _file_text(path).decode("utf-8")
        data = loads(text)
    except FileNotFoundError:
        raise ConfigurationError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ConfigurationError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    except JsonTextError as e:
        raise ConfigurationError(f"{path}: {_notshown(text, e)}") from None
    except OSError as e:
        raise ConfigurationError(f"{path}: cannot be read ({e.strerror})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigurationError(f"{path}: not a multigrain leaderboard file (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise ConfigurationError(f"{path}: version {shown(data.get('version'))}; this multigrain reads "
                                 f"version {VERSION}")
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise ConfigurationError(f"{path}: runs: expected a list")
    seen = set()
    for i, run in enumerate(runs):
        _check_run(run, f"{path}: runs[{i}]" + (f" (id {run['id']})" if isinstance(run, dict) and
                                                 isinstance(run.get("id"), str) and len(run["id"]) <= 80 else ""))
        if run["id"] in seen:
            raise ConfigurationError(f"{path}: runs[{i}]: id {run['id']} appears twice")
        seen.add(run["id"])
    return runs


def import_runs(client, runs: list[dict]) -> tuple[int, int]:
    """Add the runs the store does not hold (by id); (imported, already there). All or nothing:
    when writing any run fails, every run this call created is deleted again (their ids with
    them), so a later import adds them whole; a run an import killed part way (SIGKILL: no
    clean-up) left is deleted by the next one, which adds it whole. Called under
    ``store.adding_runs``. ``runs``: ``read_board``'s, every one checked."""
    from multigrain.platform.records import experiments, known_ids, search
    from multigrain.platform.tracking import experiment_id

    exp_ids = [e.experiment_id for e in experiments(client)]
    for leftover in search(client, exp_ids, f"tags.{IMPORTING_TAG} = 'true'"):  # no import is writing now
        client.delete_run(leftover.info.run_id)
    known = known_ids(client)
    todo = [run for run in runs if run["id"] not in known]
    created: list[str] = []
    try:
        with Stage("importing runs", total=sum(_values(run) for run in todo), unit="values") as stage:
            for run in todo:
                exp_id = experiment_id(client, run["experiment"])
                tags = {**run.get("tags", {}), "mlflow.runName": run["name"], "portable_id": run["id"],
                        IMPORTING_TAG: "true"}
                created.append(client.create_run(exp_id, start_time=run["start_time"], tags=tags).info.run_id)
                _write_run(client, created[-1], run, stage.update)
    except BaseException:
        for run_id in created:
            try:
                client.delete_run(run_id)
            except Exception:  # the store failed: the original error is the one to see
                pass
        raise
    return len(todo), len(runs) - len(todo)


def _values(run: dict) -> int:
    """How many metric values and params ``_write_run`` logs for ``run``."""
    history = run.get("history", {})
    return (sum(len(points) for points in history.values()) + len(run.get("params", {}))
            + sum(k not in history for k in run["metrics"]))


def _write_run(client, run_id: str, run: dict, done: Callable[[int], None] = lambda n: None) -> None:
    """The metrics, params, curves and end of an imported run; ``done(n)`` after each batch of
    ``n`` values (in batches as large as MLflow takes: each is one store transaction)."""
    from mlflow.entities import Metric, Param

    when = run.get("end_time") or run["start_time"]
    history = run.get("history", {})
    metrics = [Metric(k, float(v), when, step) for k, points in history.items() for step, v in points]
    metrics += [Metric(k, float(v), when, 0) for k, v in run["metrics"].items() if k not in history]
    params = [Param(k, v) for k, v in sorted(run.get("params", {}).items())]
    m = p = 0
    while m < len(metrics) or p < len(params):
        some_params = params[p:p + PARAMS_PER_BATCH]
        some_metrics = metrics[m:m + BATCH - len(some_params)]
        client.log_batch(run_id, metrics=some_metrics, params=some_params, synchronous=True)
        m, p = m + len(some_metrics), p + len(some_params)
        done(len(some_metrics) + len(some_params))
    if history:
        _log_curves(client, run_id, history, run.get("tags", {}))
    client.set_terminated(run_id, run["status"], end_time=run.get("end_time"))
    client.delete_tag(run_id, IMPORTING_TAG)


def _log_curves(client, run_id: str, history: dict, tags: dict) -> None:
    """The imported run's learning curves, drawn as its own training drew them."""
    from multigrain.platform.artifacts import plot_curves
    from multigrain.platform.store import log_artifact

    lb: Optional[str] = tags.get("leaderboard_metric")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "learning_curves.json").write_text(json.dumps(history, indent=2), encoding="utf-8")
        plot_curves({"run": history}, Path(tmp) / "learning_curves.png", lb[len("test_"):] if lb else None)
        for name in ("learning_curves.json", "learning_curves.png"):
            log_artifact(client, run_id, str(Path(tmp) / name))
