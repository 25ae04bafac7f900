"""Hostile files handed to ``multigrain leaderboard --import``: what is no regular file (a FIFO
hung the import forever; ``/dev/zero`` behind a link filled the memory until a MemoryError
traceback; a folder), a file larger than any export, and a run with a long history (it imported
silently, 100 values per store transaction: 100,000 points took a minute and more, 3,000,000 had no
end). Each refusal is one line naming the file, exit 2, before the store is created or touched."""
import os
import time

import pytest

from tests.conftest import run_cli
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

