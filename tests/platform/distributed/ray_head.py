"""Ray heads of the tests' own: ``free_port`` and ``LocalHead`` (a private ``ray start --head``
that is stopped without ``ray stop``)."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from multigrain.platform.ray.jobs import jobs_api


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports of 127.0.0.1 that nothing listens on now. The sockets are held
    open together while the ports are chosen: ports picked one at a time can repeat (each is free
    again once its socket closes), and Ray refuses a head given one port for two components."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now."""
    return free_ports(1)[0]


@dataclass
class LocalHead:
    """A Ray head of our own (the tests of job submission), started with
    ``ray start --head --block`` in a new session on private ports and a private temp dir.

    Stopping never uses ``ray stop`` (which stops every Ray of the machine): SIGTERM to the
    ``ray start --block`` process makes it kill the processes it started (GCS, raylet,
    dashboard, their workers); then anything left in the process group it leads - only
    processes of this head - gets SIGKILL."""

    temp_dir: str
    port: int
    dashboard_port: int
    process: Any = None
    log: Any = None
    owns_temp_dir: bool = False
    extra_env: dict = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @classmethod
    def start(cls, num_cpus: int = 1, temp_dir: Optional[str] = None, env: Optional[dict] = None,
              cwd: Optional[str] = None, timeout: float = 90.0) -> "LocalHead":
        owns = temp_dir is None
        temp_dir = temp_dir or tempfile.mkdtemp(prefix="mgray-", dir="/tmp")  # short: socket paths
        port, dashboard_port, client_port, agent_port, runtime_env_port, metrics_port = free_ports(6)
        head = cls(temp_dir, port, dashboard_port, owns_temp_dir=owns, extra_env=dict(env or {}))
        ray_bin = Path(sys.executable).with_name("ray")
        cmd = [str(ray_bin), "start", "--head", "--block", f"--port={head.port}",
               f"--dashboard-port={head.dashboard_port}", "--dashboard-host=127.0.0.1", "--include-dashboard=true",
               f"--temp-dir={temp_dir}", f"--num-cpus={num_cpus}", "--num-gpus=0", "--disable-usage-stats",
               f"--ray-client-server-port={client_port}", f"--dashboard-agent-listen-port={agent_port}",
               f"--runtime-env-agent-port={runtime_env_port}", f"--metrics-export-port={metrics_port}"]
        full_env = dict(os.environ)
        full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
        full_env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "0"
        full_env.pop("RAY_ADDRESS", None)
        full_env.update(head.extra_env)
        head.log = open(Path(temp_dir) / "ray_start.log", "wb")
        head.process = subprocess.Popen(cmd, stdout=head.log, stderr=subprocess.STDOUT, env=full_env,
                                        cwd=cwd or temp_dir, start_new_session=True)
        try:
            head.wait_ready(timeout)
        except BaseException:
            head.stop()
            raise
        return head

    def wait_ready(self, timeout: float) -> None:
        """Until the Jobs API answers (the client carries the cluster's auth token)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.process.returncode}: {self.read_log()[-2000:]}")
            try:
                jobs_api(self.dashboard_url).list_jobs()
                return
            except (ConnectionError, RuntimeError, OSError, ValueError):
                time.sleep(0.5)
        raise TimeoutError(f"the Ray head did not come up in {timeout:.0f} s: {self.read_log()[-2000:]}")

    def read_log(self) -> str:
        try:
            return (Path(self.temp_dir) / "ray_start.log").read_text(errors="replace")
        except OSError:
            return ""

    def leftover_pids(self) -> list[int]:
        """Live processes whose command line names this head's temp dir (Linux /proc)."""
        needle = self.temp_dir.encode()
        pids = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                if needle in (entry / "cmdline").read_bytes() and int(entry.name) != os.getpid():
                    pids.append(int(entry.name))
            except (OSError, ValueError):
                continue
        return pids

    def stop(self, grace: float = 20.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # our own session: only this head's processes
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.leftover_pids():  # e.g. workers the raylet put in process groups of their own
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.owns_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
