"""ray_cluster/start_own_ray.sh and stop_own_ray.sh, which the cluster YAMLs run instead of
`ray start` / `ray stop`: the start records the PIDs (and start times) of the processes it started,
the stop signals exactly those (and what they started since): another Ray of the same machine, and
an unrelated process whose command line names the same port, keep running; a recorded PID now
held by another process (another start time) is never signalled."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import proc_stat
from tests.platform.distributed.ray_head import free_ports

ROOT = Path(__file__).resolve().parents[3]
START = ROOT / "ray_cluster" / "start_own_ray.sh"
STOP = ROOT / "ray_cluster" / "stop_own_ray.sh"
ENV = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))


def start_head(temp_dir: str, pidfile: Path) -> int:
    while True:  # a private range of worker ports, holding none of the other five (Ray refuses an overlap)
        port, client, node_manager, object_manager, agent, workers = free_ports(6)
        lo = workers // 100 * 100
        if not any(lo <= p <= lo + 50 for p in (port, client, node_manager, object_manager, agent)):
            break
    ports = [f"--ray-client-server-port={client}", f"--node-manager-port={node_manager}",
             f"--object-manager-port={object_manager}", f"--dashboard-agent-listen-port={agent}"]
    out = subprocess.run(["bash", str(START), str(pidfile), "--head", f"--port={port}", f"--temp-dir={temp_dir}",
                          "--include-dashboard=false", "--num-cpus=1", "--disable-usage-stats",
                          "--node-ip-address=127.0.0.1", f"--min-worker-port={lo}", f"--max-worker-port={lo + 50}",
                          *ports], capture_output=True, text=True, timeout=180, env=ENV)
    assert out.returncode == 0, out.stdout + out.stderr + (Path(f"{pidfile}.log").read_text()
                                                           if Path(f"{pidfile}.log").exists() else "")
    return port


def processes_of(temp_dir: str) -> set[int]:
    """Running (not zombie) processes whose command line names ``temp_dir``."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if temp_dir.encode() in (entry / "cmdline").read_bytes() and state(int(entry.name)) not in ("", "Z"):
                found.add(int(entry.name))
        except OSError:
            pass
    return found


def state(pid: int) -> str:
    return (proc_stat(pid) or [""])[0]


def start_time(pid: int) -> str:
    return proc_stat(pid)[19]


def recorded(pidfile: Path) -> dict[int, str]:
    return {int(line.split()[0]): line.split()[1] for line in pidfile.read_text().splitlines()}


def test_stops_exactly_the_processes_it_started():
    dirs = [tempfile.mkdtemp(prefix="mg-ray-stop-"), tempfile.mkdtemp(prefix="mg-ray-keep-")]
    pidfiles = [Path(d) / "ray.pids" for d in dirs]
    bystander = None
    try:
        ports = [start_head(d, f) for d, f in zip(dirs, pidfiles)]
        ours = recorded(pidfiles[0])
        assert len(ours) >= 3 and all(start_time(pid) == start for pid, start in ours.items())
        first = next(iter(ours))
        assert "ray" in Path(f"/proc/{first}/cmdline").read_text() and os.getsid(first) == first  # `ray start --block`
        assert processes_of(dirs[0]) and processes_of(dirs[1])
        environ = Path(f"/proc/{first}/environ").read_bytes().split(b"\0")
        assert b"MULTIGRAIN_RAY_METRICS_HOST=127.0.0.1" in environ and b"RAY_AUTH_MODE=token" in environ
        assert any(e.startswith(b"PYTHONPATH=") and b"ray_cluster/ray_site" in e for e in environ)
        # what the old script's `pkill -f` pattern matched: an unrelated process naming the port
        bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                                      f"--gcs-address=127.0.0.1:{ports[0]}", f"--gcs_server_port={ports[0]}"],
                                     start_new_session=True)
        out = subprocess.run(["bash", str(STOP), str(pidfiles[0])], capture_output=True, text=True, timeout=90)
        assert out.returncode == 0, out.stderr
        deadline = time.time() + 10
        while processes_of(dirs[0]) and time.time() < deadline:
            time.sleep(0.2)
        assert not processes_of(dirs[0])
        assert not any(state(pid) not in ("", "Z") and start_time(pid) == start for pid, start in ours.items())
        assert not pidfiles[0].exists()
        assert bystander.poll() is None  # untouched
        assert processes_of(dirs[1]) and all(state(pid) not in ("", "Z") for pid in recorded(pidfiles[1]))
        # again, nothing recorded: nothing to do
        assert subprocess.run(["bash", str(STOP), str(pidfiles[0])], timeout=30).returncode == 0
    finally:
        if bystander is not None:
            bystander.kill()
            bystander.wait()
        for pidfile in pidfiles:
            subprocess.run(["bash", str(STOP), str(pidfile)], timeout=90)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def test_a_recorded_pid_held_by_another_process_is_not_signalled(tmp_path):
    """PIDs are reused: a line whose start time is not the running process's is skipped."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        deadline = time.time() + 10
        while state(other.pid) in ("", "Z") and time.time() < deadline:
            time.sleep(0.05)
        pidfile = tmp_path / "ray.pids"
        pidfile.write_text(f"{other.pid} {int(start_time(other.pid)) - 1}\nnot-a-pid 5\n")
        out = subprocess.run(["bash", str(STOP), str(pidfile)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        time.sleep(0.5)
        assert other.poll() is None and not pidfile.exists()
        pidfile.write_text(f"{other.pid} {start_time(other.pid)}\n")  # its own start time: stopped
        assert subprocess.run(["bash", str(STOP), str(pidfile)], timeout=60).returncode == 0
        assert other.wait(10) == -signal.SIGTERM
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def test_start_refuses_a_second_start_over_a_running_one(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        time.sleep(0.2)
        pidfile = tmp_path / "ray.pids"
        pidfile.write_text(f"{other.pid} {start_time(other.pid)}\n")
        out = subprocess.run(["bash", str(START), str(pidfile), "--head"], capture_output=True, text=True,
                             timeout=60, env=ENV)
        assert out.returncode == 1 and "already running" in out.stderr
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
