"""Cluster job submission against a real Ray head of our own (private ports and temp dir).

The head is stopped through ``LocalHead.stop`` (SIGTERM to its ``ray start --block``, then
SIGKILL to what is left of its own processes); never ``ray stop``.
"""
import json

import pytest

from multigrain.platform.commands import main as cli_main
from multigrain.platform.ray.jobs import list_jobs, wait_for_job
from multigrain.platform.specs import load_spec, spec_hash
from tests.conftest import mlflow_runs, resume_tagger_spec, write_spec
from tests.platform.distributed.ray_head import LocalHead, free_port


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("head_cwd")
    head = LocalHead.start(num_cpus=1, cwd=str(cwd))
    yield head
    head.stop()
    assert head.process.poll() is not None
    assert head.leftover_pids() == []


def test_submit_twice_runs_one_job(head, tmp_path, capsys):
    spec = resume_tagger_spec(tmp_path / "data")
    spec_path = write_spec(tmp_path, spec)
    uri = f"sqlite:///{tmp_path}/jobs.db"
    job_cwd = tmp_path / "cluster checkout"  # --cwd: where the job runs; relative paths resolve there
    job_cwd.mkdir()
    argv = ["submit", spec_path, "--address", head.dashboard_url, "--cwd", str(job_cwd), "--tracking-uri", uri]
    digest = spec_hash(spec)
    sid = f"multigrain-{digest[:16]}"

    assert cli_main(argv) == 0
    assert f"submitted {sid}" in capsys.readouterr().out
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert f"{sid} was already submitted" in out and "not started again" in out

    assert wait_for_job(head.dashboard_url, sid, timeout=180, poll=1) == "SUCCEEDED"
    assert cli_main(argv) == 0  # after it finished: still the same job
    assert "status SUCCEEDED; not started again" in capsys.readouterr().out
    jobs = list_jobs(head.dashboard_url)
    assert [j["submission_id"] for j in jobs] == [sid]
    runs = mlflow_runs(uri)
    assert len(runs) == 1 and runs[0].data.tags["spec_hash"] == spec_hash(spec)
    shipped = json.loads((job_cwd / ".multigrain" / "jobs" / f"tiny-{digest[:8]}.json").read_text())
    assert shipped == spec  # the resolved spec travelled inline, unchanged
    metrics = json.loads((job_cwd / "runs" / "jobs" / f"tiny-{digest[:8]}" / "metrics.json").read_text())
    assert metrics["finished"] and metrics["spec_hash"] == digest

    assert cli_main(["jobs", "--address", head.dashboard_url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(j["submission_id"], j["status"], j["spec"]) for j in listed] == [(sid, "SUCCEEDED", "tiny")]
    assert cli_main(["jobs", sid, "--logs", "--address", head.dashboard_url]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{sid}: SUCCEEDED") and f'"spec_hash": "{spec_hash(spec)}"' in out


def test_submit_refuses_bad_spec_and_unreachable_head(head, tmp_path, capsys):
    spec = resume_tagger_spec(tmp_path / "data")
    spec["model"]["encoder"]["hidden_size"] = "8x"
    before = list_jobs(head.dashboard_url, everything=True)
    code = cli_main(["submit", write_spec(tmp_path, spec), "--address", head.dashboard_url])
    assert code == 2 and 'model.encoder.hidden_size: expected int, got "8x"' in capsys.readouterr().err
    assert list_jobs(head.dashboard_url, everything=True) == before  # nothing submitted

    spec["model"]["encoder"]["hidden_size"] = 8
    code = cli_main(["submit", write_spec(tmp_path, spec), "--address", f"http://127.0.0.1:{free_port()}"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach the Ray Jobs API" in err and err.count("error:") == 1


def test_a_translation_spec_runs_as_a_job(head, tmp_path):
    """``submit`` of a translator spec: the job fits the subword model, trains, and scores BLEU."""
    from tests.components.models.test_translator import spec_for, tatoeba_pairs
    from tests.conftest import DATA

    spec = spec_for(tatoeba_pairs(DATA, tmp_path, 20), epochs=1)
    spec["test_data_path"] = spec["train_data_path"]
    spec_path = write_spec(tmp_path, spec)
    digest = spec_hash(load_spec(spec_path))  # as submit reads it (Jsonnet writes 1.0 as 1)
    job_cwd = tmp_path / "checkout"
    job_cwd.mkdir()
    assert cli_main(["submit", spec_path, "--address", head.dashboard_url, "--cwd", str(job_cwd),
                     "--tracking-uri", f"sqlite:///{tmp_path}/mt.db"]) == 0
    assert wait_for_job(head.dashboard_url, f"multigrain-{digest[:16]}", timeout=180, poll=1) == "SUCCEEDED"
    run_dir = job_cwd / "runs" / "jobs" / f"tiny-{digest[:8]}"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["finished"] and 0 <= metrics["test"]["bleu"] <= 100 and "chrf" in metrics["test"]
    assert (run_dir / "resources" / "target_subwords.json").is_file()
    runs = mlflow_runs(f"sqlite:///{tmp_path}/mt.db")
    assert [r.data.tags["spec_hash"] for r in runs] == [digest]
