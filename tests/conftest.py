import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
os.environ.setdefault("MULTIGRAIN_QUIET", "1")


@pytest.fixture
def data_dir() -> Path:
    if not DATA.exists():
        pytest.fail(f"shared data not found at {DATA}")
    return DATA


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in a temporary working directory (MLflow DB, runs/) with the repo's specs reachable."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


def run_cli(*args, cwd=None, env=None, timeout=600):
    """The CLI in a subprocess, as the console script runs it (``-P``: the working directory is not
    put on ``sys.path``)."""
    import subprocess

    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-P", "-m", "multigrain.platform.cli", *map(str, args)], cwd=cwd or ROOT,
                          capture_output=True, text=True, env=full_env, timeout=timeout)
