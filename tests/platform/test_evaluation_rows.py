"""``evaluate-all``'s rows in MLflow: a row whose logging fails ends FAILED, never RUNNING."""
import pytest

from multigrain.platform.ray.evaluate import record_evaluations
from multigrain.platform.runs import Run
from tests.conftest import mlflow_runs, resume_tagger_spec


def test_a_row_that_fails_to_log_ends_failed_not_running(tmp_path):
    spec = resume_tagger_spec(tmp_path / "data")
    Run(spec, tmp_path / "run").train()
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    row = {"run_dir": str(tmp_path / "run"), "data": spec["test_data_path"], "metrics": {"f1": 0.5},
           "leaderboard_metric": "f1", "tracking_tags": {"bad key!?" * 40: "x"}}
    with pytest.raises(Exception):
        record_evaluations([row], uri)
    runs = mlflow_runs(uri)
    assert [r.info.status for r in runs] == ["FAILED"]
    good = {**row, "tracking_tags": {"ok": "1"}}
    record_evaluations([good], uri)
    assert sorted(r.info.status for r in mlflow_runs(uri)) == ["FAILED", "FINISHED"]
