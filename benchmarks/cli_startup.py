"""`multigrain --help` wall time (target <= 1.0 s): median of 7 fresh processes."""
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(runs: int = 7) -> float:
    exe = Path(sys.executable).with_name("multigrain")
    cmd = [str(exe), "--help"] if exe.exists() else [sys.executable, "-m", "multigrain.platform.cli", "--help"]
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(f"multigrain --help: median {med:.3f} s over {runs} runs (min {min(times):.3f}, max {max(times):.3f})")
    return med


if __name__ == "__main__":
    sys.exit(0 if main() <= 1.0 else 1)
