"""Attaching a process to Ray (a local Ray or a running cluster), the cluster's resources, the
runtime env of cluster jobs, and errors raised on workers as the driver sees them."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Optional

from multigrain.platform.digits import whole_number
from multigrain.platform.errors import ConfigurationError, MultigrainError


class RemoteError(MultigrainError):
    """A user-facing error raised on a worker, re-raised as a plain message: ``DataError`` and
    ``SpecError`` take constructor arguments that pickle cannot rebuild on the driver."""


def error_text(exc: BaseException) -> str:
    """One line for a failed Ray task or actor call: the worker's own message when it raised a
    ``MultigrainError`` (``RemoteError``), else the cause's type and message, else the last line
    of Ray's text."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, MultigrainError):
        return str(cause)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__.rsplit('.', 1)[-1]}: {cause}".strip()
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


# ---------------------------------------------------------------------------- connecting
def check_reachable(address: str, timeout: float = 3.0) -> None:
    """A TCP connect to ``host:port`` (or ``ray://host:port``): one clear error instead of Ray's
    long retry loop when nothing listens there."""
    target = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = target.rpartition(":")
    if not sep or whole_number(port, max_digits=5) is None:
        raise ConfigurationError(f"--address {address!r}: expected HOST:PORT (the head's GCS port, 6379 by "
                                 f"default), ray://HOST:10001, 'auto' or 'local'")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise ConfigurationError(f"--address {address}: cannot reach a Ray cluster there ({e.strerror or e}); "
                                 f"is the head running (ray start --head --port={port})?") from None


def patient_serve_defaults() -> None:
    """Before a local ``ray.init`` (its workers inherit the environment): give a Serve proxy 60 s,
    not 5, to report ready. On a loaded laptop or CI box the proxy's start-up takes longer than 5 s,
    the controller kills it, and ``serve.start`` fails with ActorDiedError. A value the user set
    stays."""
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")


#: Ray's switch for a single-node Ray (the default on macOS and Windows): its node address is the
#: loopback address, so the GCS, raylet, agents and workers listen on 127.0.0.1 only
SINGLE_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def loopback_only() -> None:
    """Before a local ``ray.init``: a Ray that no other machine can join or reach. Every process
    it starts (GCS, raylet, dashboard and runtime-env agents, workers) inherits the setting and
    binds 127.0.0.1. Ray reads it when ``ray`` is imported; when it already is (tests), the
    same constant is set on the loaded module."""
    os.environ[SINGLE_NODE_ENV] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


def node_address() -> str:
    import ray

    return ray.util.get_node_ip_address()


#: Ray's setting of the nice value its workers start at (15 unless set)
WORKER_NICENESS_ENV = "RAY_worker_niceness"


def connect(address: Optional[str] = None, loopback: bool = False, worker_niceness: Optional[int] = None,
            **local_kwargs) -> bool:
    """Attach this process to Ray. ``None``/``"local"`` starts Ray in-process (``loopback``:
    listening on 127.0.0.1 only); anything else joins a running cluster. Returns whether this
    call initialised Ray (then the caller shuts it down); an already-initialised Ray is reused
    as is. ``worker_niceness``: the nice value the local Ray starts its workers at, where the
    user has not set ``RAY_worker_niceness`` (Ray's own default is 15: its workers then yield the
    processor to every ordinary process, and a suite's trainings beside other work slow down
    several-fold)."""
    import ray

    if ray.is_initialized():
        return False
    if address in (None, "", "local"):
        local_kwargs.setdefault("include_dashboard", False)
        local_kwargs.setdefault("log_to_driver", False)
        patient_serve_defaults()
        if loopback:
            loopback_only()
        chosen = worker_niceness is not None and WORKER_NICENESS_ENV not in os.environ
        if chosen:  # read by the raylet this init starts; not left for a later Ray of this process
            os.environ[WORKER_NICENESS_ENV] = str(worker_niceness)
        try:
            _ray_init(address="local", **local_kwargs)
        finally:
            if chosen:
                os.environ.pop(WORKER_NICENESS_ENV, None)
        node = node_address() if loopback else None
        if node is not None and node not in ("127.0.0.1", "::1"):
            ray.shutdown()
            raise ConfigurationError(f"the local Ray took the node address {node}, not 127.0.0.1: it would "
                                     f"listen on the network")
        return True
    if address.startswith(("http://", "https://")):
        raise ConfigurationError(f"--address {address}: that is a dashboard / Jobs API address (used by "
                                 f"`multigrain submit`); this command needs the cluster address HOST:6379")
    if address != "auto":
        check_reachable(address)
    try:
        _ray_init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigurationError(f"--address {address}: cannot connect to Ray: {e}") from None
    return True


def _ray_init(**kwargs) -> None:
    """``ray.init``, keeping the SIGTERM handler set before it (a command's, which unwinds like
    Ctrl-C; ``ray.init`` sets one that exits at once, and no clean-up), and shutting down what it
    started when it fails or is interrupted part way (Ray's agents outlived the command). A SIGTERM
    during it is a ``KeyboardInterrupt``, as before and after it."""
    import signal
    import threading

    import ray

    from multigrain.platform import interruption

    before = signal.getsignal(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    try:
        ray.init(**kwargs)
    except BaseException as e:
        ray.shutdown()  # also a node started but not yet connected to
        if isinstance(e, SystemExit) and e.code == signal.SIGTERM and callable(before):
            raise KeyboardInterrupt from None  # Ray's handler: sys.exit(signum)
        raise
    finally:
        if callable(before):
            signal.signal(signal.SIGTERM, before)
    if before is interruption.interrupt:
        interruption.check()  # a SIGTERM deferred during an import, then sent to Ray's handler and dropped


def shutdown() -> None:
    """``ray.shutdown``, then the SIGTERM handler set again: Ray resets the process's own to the
    default action (while Python still reports its handler), so a SIGTERM in the command's last
    steps (recording to MLflow, printing) killed it there."""
    import signal
    import threading

    import ray

    ray.shutdown()
    if threading.current_thread() is threading.main_thread():
        handler = signal.getsignal(signal.SIGTERM)
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)


def cluster_resources() -> dict[str, float]:
    import ray

    return dict(ray.cluster_resources())


def gpus_per_actor(requested: Optional[float]) -> float:
    """GPUs of a serving replica or evaluator actor: the requested number, else 1 when the
    cluster has a GPU, else 0."""
    if requested is not None:
        return requested
    return 1.0 if cluster_resources().get("GPU", 0) >= 1 else 0.0


# ---------------------------------------------------------------------------- runtime env
def load_runtime_env(path: Optional[str], working_dir: Optional[str] = None) -> Optional[dict]:
    """A runtime env YAML (``ray_cluster/runtime_env.yaml``); a relative ``working_dir`` is
    taken relative to the current directory, as Ray does."""
    env: dict = {}
    if path:
        import yaml

        p = Path(path)
        if not p.exists():
            raise ConfigurationError(f"--runtime-env {path}: file not found")
        env = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        if not isinstance(env, dict):
            raise ConfigurationError(f"--runtime-env {path}: expected a mapping of runtime env fields")
    if working_dir:
        env["working_dir"] = working_dir
    if env.get("working_dir") and not str(env["working_dir"]).startswith(("s3://", "gs://", "https://")):
        wd = Path(env["working_dir"])
        if not wd.is_dir():
            raise ConfigurationError(f"runtime env working_dir {wd}: not a directory")
        env["working_dir"] = str(wd.resolve())
    return env or None


def monitored_rounds(pending: dict, monitor, poll: float):
    """Wait on ``pending`` (task ref -> item, emptied as tasks end) in rounds of at most ``poll``
    seconds; each round yields ``(ended, snapshot)``: the items that ended, as ``(item, result,
    error)`` (``error``: the failed task's ``error_text``, else None), and the monitor's snapshot.
    Ctrl-C cancels the tasks left; the monitor is killed at the end."""
    import ray
    from ray.exceptions import RayError

    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=poll)
            ended = []
            for ref in done:
                item = pending.pop(ref)
                try:
                    ended.append((item, ray.get(ref), None))
                except RayError as e:
                    ended.append((item, None, error_text(e)))
            try:
                snapshot = ray.get(monitor.snapshot.remote(), timeout=10)
            except RayError:
                snapshot = {}
            yield ended, snapshot
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        ray.kill(monitor)
