"""Runs under faults: out-of-range spec values refused before anything is written, SIGTERM and
SIGKILL at any moment leave a directory ``--resume`` continues bit-identically into the same
MLflow run, and trainings started together on a fresh store all finish."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.conftest import DATA


def head_sentences(src, n, dst):
    blocks = src.read_text(encoding="utf-8").strip("\n").split("\n\n")[:n]
    dst.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return str(dst)


def write_spec(tmp_path, epochs=3, **trainer):
    src = DATA / "resume_ner" / "dev.char.bmes"
    spec = {
        "task": "ner", "dataset": "tiny", "dataset_reader": {"type": "resume_ner"},
        "train_data_path": head_sentences(src, 24, tmp_path / "train.bmes"),
        "validation_data_path": head_sentences(src, 8, tmp_path / "dev.bmes"),
        "data_loader": {"batch_size": 4},
        "model": {"type": "tagger", "embedder": {"type": "char_bigram", "char_dim": 16, "bigram_dim": 16,
                                                 "dropout": 0.3},
                  "encoder": {"type": "bilstm", "hidden_size": 16}, "head": {"type": "crf"}},
        "trainer": {"num_epochs": epochs, "optimizer": {"type": "adam", "lr": 0.01}, "validation_metric": "+f1",
                    **trainer},
        "seed": 7,
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def cli(*args):
    return [sys.executable, "-P", "-m", "multigrain.platform.cli", *map(str, args)]


def env():
    return {**os.environ, "CI": "true", "MULTIGRAIN_QUIET": "1"}


def mlflow_runs(db, run_dir=None):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exps = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(exps) if exps else []
    runs = [r for r in runs if run_dir is None or r.data.tags.get("run_dir") == str(run_dir)]
    return client, runs


@pytest.mark.parametrize("override, message", [
    ("trainer.num_epochs=0", "trainer.num_epochs: 0 is out of range: expected >= 1"),
    ("trainer.num_epochs=-1", "trainer.num_epochs: -1 is out of range: expected >= 1"),
    ("trainer.num_epochs=2.0", "trainer.num_epochs: expected int, got 2.0"),
    ("data_loader.batch_size=0", "data_loader.batch_size: 0 is out of range: expected >= 1"),
    ("model.embedder.dropout=1.0", "model.embedder.dropout: 1.0 is out of range: expected a value in [0, 1)"),
    ("trainer.validation_metric=f1", "trainer.validation_metric: expected +NAME or -NAME"),
])
def test_out_of_range_values_are_refused_before_anything_is_written(tmp_path, override, message):
    spec = write_spec(tmp_path)
    out = subprocess.run(cli("train", spec, "-s", tmp_path / "run", "-o", override, "--no-tracking"),
                         capture_output=True, text=True, env=env(), cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert not (tmp_path / "run").exists()


def test_a_validation_metric_the_model_does_not_report_is_refused_before_training(tmp_path):
    spec = write_spec(tmp_path)
    out = subprocess.run(cli("train", spec, "-s", tmp_path / "run", "-o", "trainer.validation_metric=+foo",
                             "--no-tracking"), capture_output=True, text=True, env=env(), cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "the model reports no metric 'foo'; it reports f1, loss, precision, recall" in out.stderr
    assert not (tmp_path / "run").exists()


def final_state(run_dir):
    last = torch.load(run_dir / "last.pt", weights_only=True)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return last["model"], last["history"], {k: metrics[k] for k in ("validation", "best_epoch", "epochs_completed")}


def assert_same_training(a, b):
    wa, ha, ma = final_state(a)
    wb, hb, mb = final_state(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert ha == hb and ma == mb


def test_sigterm_stops_like_ctrl_c_and_resume_continues_the_same_mlflow_run(tmp_path):
    # ten epochs: the signal must land before the last one ends, and a loaded machine may take
    # seconds to notice tracking.json (three epochs failed that way once, beside benchmarks)
    epochs = 10
    spec, db = write_spec(tmp_path, epochs=epochs), tmp_path / "mlruns.db"
    uri = f"sqlite:///{db}"
    subprocess.run(cli("train", spec, "-s", tmp_path / "full", "--no-tracking"), check=True, env=env(), cwd=tmp_path,
                   capture_output=True)
    proc = subprocess.Popen(cli("train", spec, "-s", tmp_path / "run", "--tracking-uri", uri), env=env(),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "run" / "tracking.json").exists() and time.time() < deadline:
        time.sleep(0.05)  # the MLflow run exists once the first epoch ended
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err, err
    client, runs = mlflow_runs(db)
    assert [r.info.status for r in runs] == ["KILLED"]
    # the directory spelt otherwise (relative, a trailing slash) is the same run
    subprocess.run(cli("train", spec, "-s", "./run/", "--resume", "--tracking-uri", uri), check=True,
                   env=env(), cwd=tmp_path, capture_output=True)
    client, runs = mlflow_runs(db)
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert [m.step for m in client.get_metric_history(runs[0].info.run_id, "train_loss")] == list(range(1, epochs + 1))
    assert_same_training(tmp_path / "full", tmp_path / "run")


def test_sigkill_at_random_moments_then_resume_is_bit_identical_with_one_mlflow_run(tmp_path):
    spec, db = write_spec(tmp_path, epochs=4), tmp_path / "mlruns.db"
    uri = f"sqlite:///{db}"
    started = time.monotonic()
    subprocess.run(cli("train", spec, "-s", tmp_path / "full", "--no-tracking"), check=True, env=env(), cwd=tmp_path,
                   capture_output=True)
    took = time.monotonic() - started  # kill moments scale with this machine's speed now (start-up included)
    rng = random.Random(2026)
    kills, finished = 0, False
    for attempt in range(4):
        resume = ["--resume"] if (tmp_path / "run").exists() else []
        proc = subprocess.Popen(cli("train", spec, "-s", tmp_path / "run", "--tracking-uri", uri, *resume),
                                env=env(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            proc.wait(timeout=rng.uniform(0.25, 0.8) * took)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            kills += 1
        else:
            assert proc.returncode == 0, proc.stderr.read()
            finished = True
            break
    assert kills >= 1
    # the last resume (and, whatever state a kill left, a second one) finishes training and tracking
    for _ in range(1 if finished else 2):
        resume = ["--resume"] if (tmp_path / "run").exists() else []  # every kill may have come before the directory
        out = subprocess.run(cli("train", spec, "-s", tmp_path / "run", *resume, "--tracking-uri", uri),
                             env=env(), cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    assert_same_training(tmp_path / "full", tmp_path / "run")
    client, runs = mlflow_runs(db, tmp_path / "run")
    assert [r.info.status for r in runs] == ["FINISHED"], [r.info.status for r in runs]
    assert sorted(m.step for m in client.get_metric_history(runs[0].info.run_id, "train_loss")) == [1, 2, 3, 4]


def test_eight_trainings_started_together_on_a_fresh_store_all_finish(tmp_path):
    spec, db = write_spec(tmp_path, epochs=1), tmp_path / "mlruns.db"
    procs = [subprocess.Popen(cli("train", spec, "-s", tmp_path / f"run{i}", "-o", f"seed={i}",
                                  "--tracking-uri", f"sqlite:///{db}"),
                              env=env(), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    _, runs = mlflow_runs(db)
    assert len(runs) == 8 and {r.info.status for r in runs} == {"FINISHED"}


def test_a_missing_store_folder_is_an_error_and_reading_creates_no_store(tmp_path):
    from tests.conftest import run_cli

    spec = write_spec(tmp_path)
    out = run_cli("train", spec, "-s", tmp_path / "run", "--tracking-uri", f"sqlite:///{tmp_path}/nope/x.db",
                  cwd=tmp_path)
    assert out.returncode == 2 and f"the folder {tmp_path}/nope does not exist" in out.stderr, out.stderr
    assert not (tmp_path / "nope").exists()
    out = run_cli("leaderboard", "ner/tiny", cwd=tmp_path, env={"MLFLOW_TRACKING_URI": ""})
    assert out.returncode == 0 and "no finished runs" in out.stdout
    assert not (tmp_path / "mlruns.db").exists()


def test_resume_of_a_directory_killed_before_its_first_epoch_starts_over(tmp_path):
    """Killed during epoch 1: config.json, spec_hash and vocabulary/ are there, no last.pt. Plain
    ``train`` refuses the non-empty directory; ``--resume`` starts it over and equals a fresh run."""
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.runs import Run

    spec = json.loads(write_spec(tmp_path, epochs=1).read_text())
    Run(spec, tmp_path / "full").train()
    Run(spec, tmp_path / "run").train()
    for name in ("last.pt", "best.pt", "metrics.json"):
        (tmp_path / "run" / name).unlink()
    (tmp_path / "run" / "last.pt.tmp").write_bytes(b"half")
    with pytest.raises(ConfigurationError, match="not empty"):
        Run(spec, tmp_path / "run").train()
    Run(spec, tmp_path / "run").train(resume=True)
    assert_same_training(tmp_path / "full", tmp_path / "run")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match="nothing to resume"):
        Run(spec, tmp_path / "other").train(resume=True)
    assert (tmp_path / "other" / "notes.txt").exists()


HOLD_LOCK = """
import sys
from pathlib import Path
from multigrain.platform.archive import training_lock
with training_lock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_a_second_training_in_a_run_directory_in_use_is_refused_until_its_holder_dies(tmp_path):
    """While one process trains into a run directory (holds its lock), ``multigrain train`` and
    ``--resume`` there exit 2 naming the directory and the holder's pid, writing nothing; once the
    holder is killed (its lock file left behind) training there works and removes the file."""
    spec, run_dir = write_spec(tmp_path, epochs=1), tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-P", "-c", HOLD_LOCK, str(run_dir)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env(), cwd=tmp_path)
    assert holder.stdout.readline().strip() == "locked"
    for extra in ([], ["--resume"]):
        out = subprocess.run(cli("train", spec, "-s", run_dir, "--no-tracking", *extra), env=env(), cwd=tmp_path,
                             capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        assert f"{run_dir}: another process (pid {holder.pid}) is training in this run directory" in out.stderr
        assert not run_dir.exists()
    holder.kill()
    holder.wait(timeout=30)
    assert (tmp_path / ".run.lock").exists()
    subprocess.run(cli("train", spec, "-s", run_dir, "--no-tracking"), check=True, env=env(), cwd=tmp_path,
                   capture_output=True)
    assert json.loads((run_dir / "metrics.json").read_text())["finished"]
    assert not (tmp_path / ".run.lock").exists()


def test_training_into_the_working_directory_itself(tmp_path):
    """``-s .`` in an empty folder trains there: the lock file goes beside the folder, not into it
    (where it made the folder look taken: "not empty ... it holds ..lock")."""
    spec, here = write_spec(tmp_path, epochs=1), tmp_path / "here"
    here.mkdir()
    out = subprocess.run(cli("train", spec, "-s", ".", "--no-tracking"), env=env(), cwd=here, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads((here / "metrics.json").read_text())["finished"]
    assert not (here / "..lock").exists() and not (tmp_path / ".here.lock").exists()
