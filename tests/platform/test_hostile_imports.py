"""Hostile files handed to ``multigrain leaderboard --import``: what is no regular file (a FIFO
hung the import forever; ``/dev/zero`` behind a link filled the memory until a MemoryError
traceback; a folder), a file larger than any export, and a run with a long history (it imported
silently, 100 values per store transaction: 100,000 points took a minute and more, 3,000,000 had no
end). Each refusal is one line naming the file, exit 2, before the store is created or touched."""
import json
import os
import time

import pytest

from tests.conftest import mlflow_runs, run_cli
from tests.platform.test_hostile_store import board_file, cli, row


@pytest.fixture
def layout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "store").mkdir()
    return tmp_path, f"sqlite:///{tmp_path / 'store' / 'm.db'}"


def test_a_fifo_is_refused_at_once_not_waited_on(layout):
    tmp, uri = layout
    os.mkfifo(tmp / "board.json")
    started = time.monotonic()
    done = run_cli("leaderboard", "--import", tmp / "board.json", "--tracking-uri", uri, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: {tmp / 'board.json'}: not a regular file (a FIFO (named pipe)); a leaderboard "
                           f"file is a file written by `multigrain leaderboard --export`\n")
    assert time.monotonic() - started < 60 and os.listdir(tmp / "store") == []


@pytest.mark.parametrize("target, kind", [("/dev/zero", "a character device"), (None, "a directory")])
def test_a_device_or_a_folder_is_refused_unread(layout, capsys, target, kind):
    tmp, uri = layout
    path = tmp / "board.json"
    if target:
        path.symlink_to(target)
    else:
        path.mkdir()
    code, out, err = cli(capsys, "leaderboard", "--import", path, "--tracking-uri", uri)
    assert (code, out) == (2, "") and err == (f"error: {path}: not a regular file ({kind}); a leaderboard file is a "
                                              f"file written by `multigrain leaderboard --export`\n")
    assert os.listdir(tmp / "store") == []


def test_a_file_larger_than_any_export_is_refused_before_it_is_read(layout, capsys):
    from multigrain.platform.portable import MAX_BYTES

    tmp, uri = layout
    big = tmp / "big.json"
    with open(big, "wb") as f:  # sparse: nothing written but its size
        f.truncate(MAX_BYTES + 1)
    code, _, err = cli(capsys, "leaderboard", "--import", big, "--tracking-uri", uri)
    assert code == 2 and err == (f"error: {big}: 67,108,865 bytes, more than the 67,108,864 bytes (64 MiB) a "
                                 f"leaderboard file may have; refused unread\n")
    assert os.listdir(tmp / "store") == []


def test_a_long_history_imports_in_batches_of_1000_with_progress_lines(layout, capsys, monkeypatch):
    """2,500 curve points and 3 params: 3 store transactions (1000 values each, the params in the
    first), progress lines under CI=true, every point in the store."""
    from mlflow.tracking import MlflowClient

    tmp, uri = layout
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("MULTIGRAIN_PROGRESS_INTERVAL", "0")
    calls = []
    real = MlflowClient.log_batch

    def counted(self, run_id, metrics=(), params=(), tags=(), **kw):
        calls.append((len(metrics), len(params)))
        return real(self, run_id, metrics=metrics, params=params, tags=tags, **kw)

    monkeypatch.setattr(MlflowClient, "log_batch", counted)
    long = row("long", history={"train_loss": [[i, 1 / (i + 1)] for i in range(2500)]},
               params={"seed": "7", "lr": "0.01", "batch_size": "16"})
    code, _, err = cli(capsys, "leaderboard", "--import", board_file(tmp / "b.json", [long]), "--tracking-uri", uri)
    assert code == 0 and err.endswith("imported 1 runs (0 already in the store) into " + uri + "\n")
    assert calls == [(997, 3), (1000, 0), (505, 0)]  # 2,500 points and test_f1, validation_f1 (no curve)
    lines = [line for line in err.splitlines() if line.startswith("importing runs: ")]
    assert lines[0].startswith("importing runs: 1,000/2,505 values (39.9%)")
    assert lines[-1].startswith("importing runs: 2,505/2,505 values (100.0%)") and lines[-1].endswith(" | done")
    (run,) = mlflow_runs(uri)
    history = MlflowClient(uri).get_metric_history(run.info.run_id, "train_loss")
    assert len(history) == 2500 and sorted(m.step for m in history)[-1] == 2499
    assert run.data.params == {"seed": "7", "lr": "0.01", "batch_size": "16"} and run.info.status == "FINISHED"


def test_more_curve_points_than_a_run_may_have_is_one_error_naming_the_run(layout, capsys):
    tmp, uri = layout
    first = row("ok")
    many = row("many", history={"train_loss": [[i, 0.5] for i in range(60_000)],
                                "validation_f1": [[i, 0.5] for i in range(40_001)]})
    bad = board_file(tmp / "many.json", [first, many])
    code, _, err = cli(capsys, "leaderboard", "--import", bad, "--tracking-uri", uri)
    assert code == 2 and err == (f"error: {bad}: runs[1] (id many): history: 100,001 curve points, more than the "
                                 f"100,000 a run may have (a training logs its curves once per epoch)\n")
    assert os.listdir(tmp / "store") == []
    json.loads(bad.read_text(encoding="utf-8"))  # the file itself is good JSON: only the count is refused
