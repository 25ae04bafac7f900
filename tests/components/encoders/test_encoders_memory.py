"""Peak memory of a PLTE and a BiG forward on inputs long enough that one [B, T, T, d] float
tensor would not fit under the cap.

How it is measured: torch's CPU allocations are invisible to ``tracemalloc``, so each forward
runs in a fresh subprocess that reads the kernel's accounting of its resident memory. After
building the model and inputs (and a small warm-up forward, so lazy initialisation is done),
the child resets its peak-RSS counter (``echo 5 > /proc/self/clear_refs`` resets ``VmHWM`` to
the current ``VmRSS``), runs the forward, and reports ``VmHWM - VmRSS_before``: the highest
extra resident memory at any moment of the forward. glibc returns large blocks to the system
on free and the forward runs under ``no_grad``, so the figure is the forward's working set.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CAP_MB = 256

CHILD = r"""
import json, sys, torch
torch.set_num_threads(1)
from multigrain.components.lattice.types import Lattice, LatticeBatch
from multigrain.components.encoders.plte import PlteEncoder
from multigrain.components.encoders.big import BigEncoder

kind, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def batch_of(n):  # words of 2 and 3 characters starting at every other character
    words = [(s, s + k) for s in range(0, n - 3, 2) for k in (1, 2)]
    return LatticeBatch.collate([Lattice.from_words(["x"] * n, words)], lambda t, c: 2)

def status():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}

enc = (PlteEncoder(d, d, num_layers=1, num_heads=2, dropout=0.0) if kind == "plte"
       else BigEncoder(d, d, num_layers=1, num_heads=2, dropout=0.0)).eval()
with torch.no_grad():
    small = batch_of(64)
    enc(torch.randn(1, small.mask.shape[1], d), small.mask, {"lattice": small})
    batch = batch_of(n)
    x = torch.randn(1, batch.mask.shape[1], d)
    open("/proc/self/clear_refs", "w").write("5")
    before = status()["VmRSS"]
    out = enc(x, batch.mask, {"lattice": batch})
    peak = status()["VmHWM"]
T = batch.mask.shape[1]
print(json.dumps({"T": T, "n": n, "peak_extra_mb": peak - before, "dense_btTd_mb": T * T * d * 4 / 2**20,
                  "finite": bool(torch.isfinite(out).all())}))
"""


def measure(kind: str, n: int, d: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(d)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def can_reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError as e:
        pytest.skip(f"cannot reset the peak RSS counter here ({e}); the measurement needs Linux /proc")


@pytest.mark.parametrize("kind,n", [("plte", 800), ("big", 2500)])
def test_forward_stays_under_the_cap(can_reset_peak, kind, n):
    result = measure(kind, n, d=64)
    assert result["finite"]
    assert result["dense_btTd_mb"] > 2 * CAP_MB, result  # one [B, T, T, d] tensor alone would break the cap
    assert result["peak_extra_mb"] < CAP_MB, result


def test_the_measurement_sees_torch_allocations(can_reset_peak):
    """The probe is not blind: a child that allocates a [T, T, d] float tensor reports it."""
    code = CHILD.split("enc = (")[0] + r"""
torch.zeros(1)
open("/proc/self/clear_refs", "w").write("5")
before = status()["VmRSS"]
t = torch.ones(300, 300, 64)
peak = status()["VmHWM"]
print(json.dumps({"peak_extra_mb": peak - before}))
"""
    proc = subprocess.run([sys.executable, "-c", code, "plte", "1", "1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    extra = json.loads(proc.stdout.strip().splitlines()[-1])["peak_extra_mb"]
    assert 300 * 300 * 64 * 4 / 2**20 * 0.95 < extra < 40
