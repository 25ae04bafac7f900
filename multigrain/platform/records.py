"""MLflow runs read as plain records, the one shape that leaderboards, ``compare``, the portable
leaderboard file and the RESULTS.md tables use:

``{"id", "run_id", "experiment", "name", "status", "start_time", "end_time", "tags", "metrics",
"params", "history"}``

``id`` is the run's identity across stores: the ``portable_id`` tag of an imported run, else its
MLflow run id. ``history`` (``{"train_loss": [[epoch, value], ...]}``) is read only when asked for.
"""
from __future__ import annotations

from typing import Iterable, Optional

#: tags that describe the machine a run was logged from, not the run
MACHINE_TAGS = ("mlflow.user", "mlflow.source.name", "mlflow.source.type", "mlflow.source.git.commit")
#: per-epoch metrics (the learning curves); the others are the run's final scores
CURVE_PREFIXES = ("train_", "validation_")
CURVE_KEYS = ("lr",)


def experiments(client, task: Optional[str] = None) -> list:
    """Active experiments: ``task`` an experiment (``ner/resume``) or a task prefix (``ner``: every
    ``ner/*``); None: all but MLflow's ``Default``."""
    from mlflow.entities import ViewType

    found = client.search_experiments(view_type=ViewType.ACTIVE_ONLY)
    if task is None:
        return [e for e in found if e.name != "Default"]
    return [e for e in found if e.name == task or e.name.startswith(task.rstrip("/") + "/")]


def search(client, experiment_ids: list[str], filter_string: str = "") -> list:
    """Every run of the experiments matching ``filter_string`` (all result pages)."""
    if not experiment_ids:
        return []
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def is_curve(key: str) -> bool:
    return key.startswith(CURVE_PREFIXES) or key in CURVE_KEYS


def record(client, run, experiment: str, history: bool = False) -> dict:
    """``params``: the run's flattened spec as it is now (an extended run's ``spec_changes`` laid over
    its logged params, ``provenance.current_params``)."""
    from multigrain.platform.provenance import current_params

    info, data = run.info, run.data
    rec = {"id": data.tags.get("portable_id") or info.run_id, "run_id": info.run_id, "experiment": experiment,
           "name": info.run_name or "", "status": info.status, "start_time": info.start_time,
           "end_time": info.end_time,
           "tags": {k: v for k, v in data.tags.items() if k not in MACHINE_TAGS and k != "portable_id"},
           "metrics": dict(data.metrics), "params": current_params(dict(data.params), data.tags), "history": {}}
    if history:
        for key in sorted(k for k in data.metrics if is_curve(k)):
            points = client.get_metric_history(info.run_id, key)
            rec["history"][key] = [[m.step, m.value] for m in sorted(points, key=lambda m: (m.step, m.timestamp))]
    return rec


def records(client, task: Optional[str] = None, filter_string: str = "", history: bool = False) -> list[dict]:
    """Records of the runs of ``task``'s experiments (see ``experiments``) matching ``filter_string``,
    oldest first."""
    exps = experiments(client, task)
    names = {e.experiment_id: e.name for e in exps}
    runs = search(client, list(names), filter_string)
    out = [record(client, r, names[r.info.experiment_id], history) for r in runs]
    return sorted(out, key=lambda r: (r["start_time"] or 0, r["id"]))


FINISHED_BOARD = "tags.leaderboard = 'true' and attributes.status = 'FINISHED'"


def known_ids(client) -> set[str]:
    """The record ids every run of the store has (imported runs: their ``portable_id``)."""
    exps = experiments(client)
    return {r.data.tags.get("portable_id") or r.info.run_id for r in search(client, [e.experiment_id for e in exps])}


def pick(rows: Iterable[dict], key) -> dict:
    """The row with the largest ``key``; ties go to the earliest."""
    best = None
    for row in rows:
        if best is None or key(row) > key(best):
            best = row
    return best
