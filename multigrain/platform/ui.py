"""The MLflow UI over the project's store: ``mlflow server`` started in a process group of its
own, bound to 127.0.0.1 unless told otherwise, with one worker and no background job runner.
Ctrl-C or SIGTERM stops that group (and only it). The group is led by a supervisor
(``process_group``) that ends it when this process dies, even by SIGKILL: no ``mlflow server``
or uvicorn is left behind. The store is read, never created: a missing one is an error."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.mlflow_views import ui_url
from multigrain.platform.tracking import sqlite_path

READY_SECONDS = 120


def server_command(uri: str, host: str, port: int) -> list[str]:
    db = sqlite_path(uri)
    root = (db.parent if db is not None else Path.cwd()) / "mlruns"
    return [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", host, "--port", str(port),
            "--workers", "1", "--default-artifact-root", str(root.resolve()), "--no-serve-artifacts"]


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def server_env() -> dict:
    """The environment of the MLflow server's process group: no job execution, this multigrain
    importable (the supervisor imports it), and without pydantic's notes on mlflow 3.17's models
    ('Field "model_name" in PromptModelConfig ...', four lines each), as ``multigrain/__init__.py``
    drops them in our own processes; the server's other warnings stay."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), 'ignore:Field "model_:UserWarning']))
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server's process group (the one this module started) and wait for it."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def serve(uri: str, host: str = "127.0.0.1", port: int = 5000) -> int:
    from multigrain.platform.store_checks import check_store, is_new_sqlite

    check_store(uri)  # a file that is no SQLite database is refused, never handed to the server to overwrite
    db = sqlite_path(uri)
    if db is not None and (not db.is_file() or is_new_sqlite(db)):
        raise ConfigurationError(f"no MLflow store at {uri}: train a run (multigrain train) or import a leaderboard "
                                 f"file (multigrain leaderboard --import FILE) first")
    if _listening(host, port):
        raise ConfigurationError(f"{host}:{port} is already in use; choose another --port")
    env = server_env()
    supervised = [sys.executable, "-m", "multigrain.platform.process_group", str(os.getpid()), "--",
                  *server_command(uri, host, port)]
    proc = subprocess.Popen(supervised, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=None)

    def terminate(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not _listening(host, port):
            if proc.poll() is not None:
                raise ConfigurationError(f"the MLflow server exited ({proc.returncode}) before it listened on "
                                         f"{host}:{port}; its messages are above")
            if time.monotonic() > deadline:
                raise ConfigurationError(f"the MLflow server did not listen on {host}:{port} within "
                                         f"{READY_SECONDS} s")
            time.sleep(0.3)
        print(f"MLflow UI of {uri}: {ui_url(f'http://{host}:{port}')} (server process group {proc.pid}; "
              "Ctrl-C stops it)", flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        print("stopping the MLflow UI", file=sys.stderr, flush=True)
        return 0
    finally:
        _stop(proc)
        signal.signal(signal.SIGTERM, previous)
