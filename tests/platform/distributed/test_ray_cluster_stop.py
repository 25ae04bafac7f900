"""ray_cluster/stop_own_ray.sh, which the cluster YAMLs run instead of `ray stop`: it stops the
Ray on its GCS port and leaves another Ray of the same machine running."""
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.platform.distributed.ray_head import free_port

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "ray_cluster" / "stop_own_ray.sh"
RAY = str(Path(sys.executable).parent / "ray")


def start_head(temp_dir: str) -> int:
    port = free_port()
    ports = [f"--ray-client-server-port={free_port()}", f"--node-manager-port={free_port()}",
             f"--object-manager-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}"]
    lo = free_port() // 100 * 100  # a private range of worker ports
    subprocess.run([RAY, "start", "--head", f"--port={port}", f"--temp-dir={temp_dir}", "--include-dashboard=false",
                    "--num-cpus=1", "--disable-usage-stats", f"--min-worker-port={lo}", f"--max-worker-port={lo + 50}",
                    *ports], check=True, capture_output=True, timeout=120)
    return port


def processes_of(temp_dir: str) -> int:
    return len(subprocess.run(["pgrep", "-f", temp_dir], capture_output=True, text=True).stdout.split())


def test_stops_only_the_ray_on_its_port():
    dirs = [tempfile.mkdtemp(prefix="mg-ray-stop-"), tempfile.mkdtemp(prefix="mg-ray-keep-")]
    ports = []
    try:
        ports = [start_head(d) for d in dirs]
        assert processes_of(dirs[0]) > 0 and processes_of(dirs[1]) > 0
        subprocess.run(["bash", str(SCRIPT), str(ports[0])], check=True, timeout=60)
        deadline = time.time() + 10
        while processes_of(dirs[0]) and time.time() < deadline:
            time.sleep(0.2)
        assert processes_of(dirs[0]) == 0
        assert processes_of(dirs[1]) > 0  # the other Ray is untouched
    finally:
        for port in ports:
            subprocess.run(["bash", str(SCRIPT), str(port)], timeout=60)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
