"""A tracking store this process may read but not write, and a umask that takes the owner's
permissions away. A command that writes (``train``, ``log``, ``leaderboard --import``) refuses them
with one line (exit 2) before any training work (they failed after the first epoch: a traceback, a
run directory without ``metrics.json``; or left an empty mode-000 run directory); the read-only
commands (``leaderboard``, ``compare``, ``--export``) read a store they may not write without making
its lock file. "Not writable" as root: a store under ``/proc`` (nothing can be made there); as
another user: ``setpriv`` to ``nobody``, skipped without it."""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, mlflow_runs
from tests.platform.test_hostile_store import board_file, row
from tests.platform.test_mlflow_env import NO_RUNS, cli, write_spec

SETPRIV = shutil.which("setpriv")
NOBODY = 65534
as_root_with_setpriv = pytest.mark.skipif(not (SETPRIV and hasattr(os, "geteuid") and os.geteuid() == 0),
                                          reason="needs root and setpriv to run the CLI as the user nobody")


def test_a_store_whose_folder_takes_no_files_is_refused_before_training(in_tmp, capsys):
    here = in_tmp
    spec = write_spec(here)
    uri = "sqlite:////proc/mlruns.db"  # /proc exists, and nothing, even root, makes a file there
    refused = f"error: tracking URI {uri}: no file can be made or written in its folder /proc ("
    code, out, err = cli(capsys, "train", spec, "-s", here / "run", "--tracking-uri", uri)
    assert code == 2 and out == "" and err.startswith(refused) and len(err.strip().splitlines()) == 1, err
    assert not (here / "run").exists() and not Path("/proc/mlruns.db").exists()
    code, _, err = cli(capsys, "leaderboard", "--import", board_file(here / "b.json", [row()]), "--tracking-uri", uri)
    assert code == 2 and err.startswith(refused) and len(err.strip().splitlines()) == 1, err
    # reading it: no store there, nothing made
    assert cli(capsys, "leaderboard", "--all", "--tracking-uri", uri)[:2] == (0, NO_RUNS)


# as the user nobody ----------------------------------------------------------------------------
@pytest.fixture
def shared_tmp():
    """A folder every user may enter (pytest's own is root's alone), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="mg-unwritable-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def as_nobody(*args, cwd, umask=None):
    """The CLI as the user ``nobody`` (``setpriv``), optionally under ``umask``."""
    env = dict(os.environ, CI="true", OMP_NUM_THREADS="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", sys.executable, "-P", "-m",
               "multigrain.platform.cli", *map(str, args)]
    preexec = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          preexec_fn=preexec)


def listing(folder: Path) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@as_root_with_setpriv
def test_a_store_nobody_may_write_is_read_by_the_read_only_commands_and_refused_by_train(shared_tmp, capsys):
    store, work = shared_tmp / "store", shared_tmp / "work"
    store.mkdir(mode=0o755)
    work.mkdir()
    os.chmod(work, 0o777)
    uri = f"sqlite:///{store / 'm.db'}"
    assert cli(capsys, "leaderboard", "--import", board_file(shared_tmp / "b.json", [row()]),
               "--tracking-uri", uri)[0] == 0  # root's store
    (store / "m.db.lock").unlink()  # no lock: nobody may not make one, and reads without it
    before = listing(store)
    for lock in (False, True):
        if lock:  # a lock nobody may only read: taken shared
            (store / "m.db.lock").touch(mode=0o644)
            before = listing(store)
        out = as_nobody("leaderboard", "--all", "--format", "json", "--tracking-uri", uri, cwd=work)
        assert out.returncode == 0 and [r["spec_hash"] for r in json.loads(out.stdout)] == ["ab" * 32], out.stderr
        out = as_nobody("leaderboard", "--all", "--export", work / "board.json", "--tracking-uri", uri, cwd=work)
        assert out.returncode == 0 and out.stderr.startswith(f"{work / 'board.json'}: exported 1 runs"), out.stderr
        out = as_nobody("compare", "ab" * 32, "--plot", work / "c.png", "--tracking-uri", uri, cwd=work)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        assert listing(store) == before
    spec = write_spec(work)
    os.chmod(spec, 0o644)
    out = as_nobody("train", spec, "-s", work / "run", "--tracking-uri", uri, cwd=work)
    assert out.returncode == 2 and out.stdout == "" and out.stderr.startswith(
        f"error: tracking URI {uri}: its folder {store} cannot be written (no write permission here, or a read-only "
        f"file system)") and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (work / "run").exists() and listing(store) == before
    assert [r.info.status for r in mlflow_runs(uri)] == ["FINISHED"]  # no run added, none left RUNNING
    out = as_nobody("leaderboard", "--import", work / "board.json", "--tracking-uri", uri, cwd=work)
    assert out.returncode == 2 and out.stderr.startswith(f"error: tracking URI {uri}: its folder {store} cannot be "
                                                         f"written"), out.stderr


@as_root_with_setpriv
def test_a_store_nobody_could_only_read_by_writing_is_one_line(shared_tmp):
    """A SQLite file without MLflow's tables: MLflow makes them when it opens it, which nobody may not."""
    import sqlite3

    store = shared_tmp / "store"
    store.mkdir(mode=0o755)
    with sqlite3.connect(store / "m.db") as db:
        db.execute("create table notes (x text)")
    os.chmod(store / "m.db", 0o644)
    uri = f"sqlite:///{store / 'm.db'}"
    out = as_nobody("leaderboard", "--all", "--tracking-uri", uri, cwd=shared_tmp)
    assert out.returncode == 2 and out.stderr.startswith(
        f"error: tracking URI {uri}: the store cannot be read without writing to it, and this process may not write "
        f"it (") and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert listing(store) == ["m.db"]


@as_root_with_setpriv
@pytest.mark.parametrize("umask", [0o777, 0o400])
def test_a_umask_taking_the_owners_permissions_is_refused_and_leaves_nothing(shared_tmp, umask):
    work = shared_tmp / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    spec = write_spec(work)
    os.chmod(spec, 0o644)
    os.chmod(work / "train.bmes", 0o644)
    out = as_nobody("train", spec, "-s", work / "run", "--no-tracking", cwd=work, umask=umask)
    assert out.returncode == 2 and out.stdout == "" and out.stderr == (
        f"error: -s {work / 'run'}: a folder made in {work} cannot be written and read back (Permission denied): the "
        f"umask {umask:03o} takes the owner's permissions away from new files and folders; set one that keeps them "
        f"(umask 022)\n"), out.stderr
    assert listing(work) == ["spec.json", "train.bmes"]
    assert stat.S_IMODE(work.stat().st_mode) == 0o777
