"""Evaluating archives on data files with a pool of Ray actors; the driver logs each result
as a leaderboard row in MLflow (workers never write the store: see the package docstring).

Faults. Evaluator actors are created with ``max_restarts``/``max_task_retries``: one that dies
is restarted, reloads its archives on demand, and the call it was running is retried.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Sequence

from multigrain.platform.errors import ConfigurationError, MultigrainError
from multigrain.platform.ray.archives import check_archives
from multigrain.platform.ray.cluster import RemoteError, cluster_resources, error_text, gpus_per_actor


class ArchiveEvaluator:
    """An actor that keeps archives loaded and evaluates them on data files. ``included``: the
    plugins the user included in the driver (``plugins.travelling``), imported first (a run
    directory never imports its own)."""

    def __init__(self, included: Sequence = ()):
        from multigrain.platform.plugins import include_travelled

        include_travelled(included)
        self.runs: dict[str, Any] = {}  # run dir -> (Run, Archive)

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, run_dir: str, data_path: str, batch_size: Optional[int] = None,
                 test_set: Optional[str] = None, reader: str = "test") -> dict:
        """Metrics of ``run_dir``'s best weights on ``data_path`` read with the spec's ``reader``
        (``multigrain evaluate``'s choice), or on its spec's test set ``test_set``; batches of the
        spec's ``eval_batch_size`` unless ``batch_size``."""
        from multigrain.platform.runs import Run
        from multigrain.platform.test_sets import evaluate_named, ranking_metric, tracking_tags

        os.environ["MULTIGRAIN_QUIET"] = "1"
        try:
            if run_dir not in self.runs:
                run = Run.open(run_dir)
                self.runs[run_dir] = (run, run.load_archive())
            run, archive = self.runs[run_dir]
            if test_set is None:
                metrics, examples = run.evaluate(data_path, batch_size, archive=archive, reader=reader)
            else:
                metrics, examples, data_path = evaluate_named(run, test_set, archive, batch_size)
        except MultigrainError as e:
            raise RemoteError(str(e)) from None
        row = {"run_dir": run_dir, "data": data_path, "reader": reader, "examples": examples, "metrics": metrics,
               "leaderboard_metric": ranking_metric(archive.model), "pid": os.getpid(),
               "tracking_tags": tracking_tags(archive.model)}
        if test_set is not None:
            row["test_set"] = test_set
        return row


def split_data_arguments(run_dirs: list[str], data: list[str]) -> tuple[list[str], list[str]]:
    """``evaluate-all --data`` entries as (files, test-set names): an entry that is no file but a
    test set's name is a name; a name some run's spec lacks is an error naming those runs."""
    from multigrain.platform.archive import read_spec
    from multigrain.platform.test_sets import NAME

    files = [d for d in data if Path(d).exists() or not NAME.match(d)]
    names = [d for d in data if d not in files]
    problems = []
    for name in names:
        lacking = []
        for run_dir in run_dirs:
            try:
                sets = read_spec(Path(run_dir)).get("test_sets") or {}
            except (OSError, ValueError, ConfigurationError):
                continue  # not a run directory: check_archives names it
            if name not in sets:
                lacking.append(run_dir)
        if lacking:
            problems.append(f"--data {name}: no such file, and no test set of that name in the spec of "
                            f"{', '.join(lacking)}")
    if problems:
        raise ConfigurationError("\n".join(problems))
    return files, names


def evaluator_pool(n: int, num_cpus: float = 1.0, num_gpus: float = 0.0, max_restarts: int = 2) -> list:
    """``n`` evaluator actors, each importing the plugins the user included here; one that dies
    is restarted (archives reloaded on demand) and the call it was running is retried."""
    import ray

    from multigrain.platform.plugins import travelling

    cls = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=max_restarts,
                     max_task_retries=max_restarts)(ArchiveEvaluator)
    included = travelling()
    return [cls.remote(included) for _ in range(n)]


def evaluate_all(run_dirs: list[str], data_paths: list[str], actors: Optional[int] = None, num_cpus: float = 1.0,
                 num_gpus: Optional[float] = None, max_restarts: int = 2, batch_size: Optional[int] = None,
                 reader: str = "test") -> list[dict]:
    """Every archive on every data file read with each spec's ``reader`` (train, validation or
    test), over a pool of evaluator actors (each archive always goes to the same actor, which
    loads it once). A ``data_paths`` entry that is no file but the name of a test set of the specs
    (``test_sets``) evaluates that set. Rows with an ``error`` failed; ``examples``: the instances scored."""
    import ray
    from ray.exceptions import RayError

    files, names = split_data_arguments(run_dirs, data_paths)
    named = check_archives(run_dirs, files)
    gpus = gpus_per_actor(num_gpus)
    cluster = cluster_resources()
    limit = [len(named), max(1, int(cluster.get("CPU", 1) // max(num_cpus, 1e-9)))]
    if gpus > 0:
        limit.append(max(1, int(cluster.get("GPU", 0) // gpus)))
    pool = evaluator_pool(max(1, min(actors or len(named), *limit)), num_cpus, gpus, max_restarts)
    n = len(pool)
    jobs = {}
    for i, run_dir in enumerate(named.values()):
        for data in data_paths:
            if data in names:
                ref = pool[i % n].evaluate.remote(run_dir, data, batch_size, test_set=data)
            else:
                ref = pool[i % n].evaluate.remote(run_dir, str(Path(data).resolve()), batch_size, reader=reader)
            jobs[ref] = (run_dir, data)
    rows = []
    try:
        for ref, (run_dir, data) in jobs.items():
            try:
                row = ray.get(ref)
                row["data"] = row["data"] if "test_set" in row else data
            except RayError as e:
                row = {"run_dir": run_dir, "data": data, "error": error_text(e)}
            rows.append(row)
    finally:
        for actor in pool:
            ray.kill(actor)
    return rows


def record_evaluations(rows: list[dict], uri: Optional[str] = None) -> None:
    """Log each successful row as a leaderboard run (``leaderboard=true``, ``evaluated_on``);
    metrics as ``test_<name>`` so ``multigrain leaderboard`` ranks them. A row of a named test set
    goes to the experiment ``<task>/<set>`` like those of the training (``platform/test_sets.py``)."""
    from mlflow.entities import RunTag

    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger, record_test_set_row

    for row in rows:
        if "error" in row:
            continue
        run = Run.open(row["run_dir"])
        ident, digest = run.identity, run.spec_hash
        if "test_set" in row:
            row["run_id"] = record_test_set_row(
                run.spec, ident, digest, row["run_dir"], row["test_set"], row["data"], row["metrics"],
                row.get("leaderboard_metric"), row.get("tracking_tags") or {}, uri, source=run.source, reuse=False)
            continue
        logger = RunLogger(uri)
        run_id = logger.start(run.spec, ident, digest, row["run_dir"], leaderboard=True)
        with logger.failing_on_error():  # a store error ends the row FAILED, never left RUNNING
            logger.client.set_tag(run_id, "evaluated_on", row["data"])
            if row.get("tracking_tags"):
                logger.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in row["tracking_tags"].items()])
            logger.client.set_tag(run_id, "mlflow.runName",
                                  f"eval-{ident['model']}-{digest[:8]}-{Path(row['data']).name}")
            logger.finish({"test": row["metrics"], "leaderboard_metric": row.get("leaderboard_metric")},
                          row["run_dir"])
        row["run_id"] = run_id


def print_evaluations(rows: list[dict], console=None) -> None:
    from multigrain.platform.console import output_console
    from rich.table import Table

    console = console or output_console(160)
    keys = sorted({k for r in rows for k in r.get("metrics", {})})
    table = Table(title="evaluate-all")
    for col in ("run dir", "data", "examples", *keys):
        table.add_column(col, justify="left" if col in ("run dir", "data") else "right")
    for r in rows:
        if "error" in r:
            table.add_row(Path(r["run_dir"]).name, r["data"], "error", *["-" for _ in keys])
            continue
        m = r["metrics"]
        table.add_row(Path(r["run_dir"]).name, r["data"], str(r["examples"]),
                      *[f"{m[k]:.4f}" if k in m else "-" for k in keys])
    console.print(table)
    for r in rows:
        if "error" in r:
            console.print(f"{r['run_dir']} on {r['data']}: {r['error']}", markup=False, highlight=False)

