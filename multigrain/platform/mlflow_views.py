"""How the MLflow UI (``multigrain ui``) opens the project's experiments: on their runs, with the
leaderboard score as a column.

- Each experiment is tagged a model-training experiment (``mlflow.experimentKind`` =
  ``custom_model_development``; ``store.EXPERIMENT_TAGS`` at creation, and here for experiments
  made before that). MLflow 3.17's UI still opens an experiment by a per-browser switch (GenAI or
  model training, kept in the browser's local storage, GenAI until the user flips it) that no
  server setting or tag changes; a ``workflowType=machine_learning`` URL parameter overrides it.
  So the addresses ``multigrain ui`` prints carry it: ``ui_url`` (the experiments list) and
  ``view_url`` (an experiment's runs in its leaderboard view).
- Each finished run logs its leaderboard score under one name, ``leaderboard_score``
  (``tracking.SCORE_METRIC``). MLflow's runs list shows no metric until one is chosen, so each
  experiment carries a saved view named ``leaderboard`` (experiment tag
  ``mlflow.sharedViewState.leaderboard``: the UI's own saved-view format) whose columns are
  ``leaderboard_score`` and the experiment's ranking metric, sorted best first. It is listed under
  the runs page's *Views* menu, and ``view_url`` opens it directly.
"""
from __future__ import annotations

import json
import time
import urllib.parse
from typing import Optional

KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"
#: the UI's saved views are experiment tags with this prefix; the view's id follows it
VIEW_PREFIX = "mlflow.sharedViewState."
VIEW_ID = "leaderboard"
VIEW_TAG = VIEW_PREFIX + VIEW_ID
SCORE_METRIC = "leaderboard_score"


def column(metric: str) -> str:
    """A metric's column key in the runs list (``metrics.`test_f1```)."""
    return f"metrics.`{metric}`"


def view_state(ranking_metric: Optional[str]) -> dict:
    metrics = [SCORE_METRIC, *([ranking_metric] if ranking_metric and ranking_metric != SCORE_METRIC else [])]
    return {"selectedColumns": [column(m) for m in metrics], "orderByKey": column(SCORE_METRIC),
            "orderByAsc": False}


def view_value(ranking_metric: Optional[str], now_ms: Optional[int] = None) -> str:
    """The saved view's tag value: the UI's envelope (name, times, the state as a JSON string)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return json.dumps({"name": VIEW_ID, "createdAt": now_ms, "updatedAt": now_ms,
                       "state": json.dumps(view_state(ranking_metric), sort_keys=True)})


def _state_of(value: Optional[str]) -> Optional[dict]:
    try:
        return json.loads(json.loads(value)["state"]) if value else None
    except (ValueError, KeyError, TypeError):
        return None


def prepare_experiment(client, experiment_id: str, ranking_metric: Optional[str]) -> None:
    """Tag the experiment a model-training one and give it the ``leaderboard`` view (rewritten only
    when its columns would change)."""
    tags = client.get_experiment(experiment_id).tags
    if tags.get(KIND_TAG) != MODEL_TRAINING:
        client.set_experiment_tag(experiment_id, KIND_TAG, MODEL_TRAINING)
    if _state_of(tags.get(VIEW_TAG)) != view_state(ranking_metric):
        client.set_experiment_tag(experiment_id, VIEW_TAG, view_value(ranking_metric))


def shown_metric(leaderboard_metric: Optional[str], metrics: dict) -> Optional[str]:
    """The metric a run's view shows beside the score: its ``leaderboard_metric`` (``test_f1``), or for
    a run not evaluated on test its best validation value (``best_validation_msp_accuracy``)."""
    if not leaderboard_metric or leaderboard_metric in metrics or not leaderboard_metric.startswith("test_"):
        return leaderboard_metric
    validation = "best_validation_" + leaderboard_metric[len("test_"):]
    return validation if validation in metrics else leaderboard_metric


def ranking_metric_of(client, experiment_id: str) -> Optional[str]:
    """``shown_metric`` of the experiment's latest finished leaderboard run."""
    runs = client.search_runs([experiment_id], "tags.leaderboard = 'true' and attributes.status = 'FINISHED'",
                              max_results=1, order_by=["attributes.end_time DESC"])
    return shown_metric(runs[0].data.tags.get("leaderboard_metric"), runs[0].data.metrics) if runs else None


def prepare_store(client) -> list[tuple[str, str]]:
    """``prepare_experiment`` for every experiment of the store (those made by older versions too);
    returns their (name, id)."""
    from mlflow.entities import ViewType

    out = []
    for exp in client.search_experiments(view_type=ViewType.ACTIVE_ONLY):
        if exp.name == "Default":
            continue
        prepare_experiment(client, exp.experiment_id, ranking_metric_of(client, exp.experiment_id))
        out.append((exp.name, exp.experiment_id))
    return out


def ui_url(base: str) -> str:
    """The UI's experiments list, switched to model training (``workflowType``)."""
    return f"{base}/#/experiments?workflowType=machine_learning"


def view_url(base: str, experiment_id: str) -> str:
    """An experiment's runs list in its ``leaderboard`` view, in model-training mode."""
    return (f"{base}/#/experiments/{urllib.parse.quote(experiment_id)}/runs?viewStateShareKey={VIEW_ID}"
            "&workflowType=machine_learning")
