"""CRF decoding speed: our batched ``viterbi_decode`` against ``torchcrf.CRF.decode`` on CPU.

B=32 sentences of n=100 characters, K=13 tags (BMES with 3 types), random emissions, full
mask, unconstrained. Both must return identical paths. Median of 30 runs (alternating rounds),
with one intra-op thread and with torch's default. Writes the ``## CRF decode`` section of
benchmarks/RESULTS.md (replacing it on re-run, leaving the other sections alone).

    python benchmarks/crf_decode.py [--no-write]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from results_md import write_section  # benchmarks/ is on sys.path when run as a script

import torch
from torchcrf import CRF

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from multigrain.components.heads.crf import viterbi_decode  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## CRF decode"
B, N, TYPES = 32, 100, ("PER", "LOC", "ORG")
LABELS = ["O"] + [f"{p}-{t}" for t in TYPES for p in "BMES"]
TARGET = 10.0
LOAD_AT_START = os.getloadavg()[0]


def median_times(fns, rounds: int = 6, per_round: int = 5, warmup: int = 2) -> list[float]:
    """Median time of each function over ``rounds * per_round`` runs. Rounds alternate between
    the functions (so drifting load from other processes on a shared machine falls on all of
    them alike); each round starts with warm-up runs (so none runs on the caches the other
    left behind)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, ts in zip(fns, times):
            for _ in range(warmup):
                fn()
            for _ in range(per_round):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def measure(threads: int | None) -> dict:
    default_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        K = len(LABELS)
        crf = CRF(K, batch_first=True)
        emissions = torch.randn(B, N, K)
        mask = torch.ones(B, N, dtype=torch.bool)
        params = (crf.transitions, crf.start_transitions, crf.end_transitions)
        with torch.no_grad():
            ours = viterbi_decode(emissions, mask, *params)
            theirs = crf.decode(emissions, mask)
            if ours.tolist() != theirs:
                raise AssertionError("viterbi_decode and torchcrf.CRF.decode disagree")
            t_ours, t_theirs = median_times([lambda: viterbi_decode(emissions, mask, *params),
                                             lambda: crf.decode(emissions, mask)])
        return {"threads": torch.get_num_threads(), "ours": t_ours, "torchcrf": t_theirs,
                "ratio": t_theirs / t_ours}
    finally:
        torch.set_num_threads(default_threads)


def section(rows: list[dict]) -> str:
    lines = [
        SECTION,
        "",
        f"`python benchmarks/crf_decode.py`: B={B}, n={N}, K={len(LABELS)} (BMES, 3 types), random emissions, "
        f"full mask, unconstrained; identical paths asserted. Median of 30 runs in 6 alternating rounds of 2 warm-up + 5 timed runs; "
        f"{platform.machine()}, {os.cpu_count()} CPU cores (shared), Python {platform.python_version()}, "
        f"torch {torch.__version__}; load average at start {LOAD_AT_START:.1f}.",
        "",
        "| intra-op threads | `viterbi_decode` | `torchcrf.CRF.decode` | speed-up | target |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['threads']} | {r['ours'] * 1e3:.2f} ms | {r['torchcrf'] * 1e3:.2f} ms | "
                     f"{r['ratio']:.1f}x | >= {TARGET:.0f}x |")
    lines += [
        "",
        "Both decoders are bound by per-op dispatch (~1-3 us per tensor op here), not arithmetic: ours "
        "issues ~3 small ops per time step in the forward pass (add, amax, add; the minimum that keeps "
        "torchcrf's exact rounding and so its exact paths), ~10 large vectorised ops to recover all "
        "backpointers, and one indexing step per position to backtrack; torchcrf adds a Python "
        "`.item()` loop over every position of every sentence. On 2 cores shared with other work "
        "the 2-thread row swings with their load (runs between 1.1 and 15 ms for ours were seen); "
        "the 1-thread row is the stable comparison.",
        "",
        "Below 10x: on a quiet machine torchcrf speeds up more than ours (its cost is Python, ours "
        "is ~300 op dispatches). Measured and dropped (2026-11-23): the forward loop in TorchScript "
        "(0.49 vs 0.46 ms), numpy ops on the same memory (0.46-0.59 ms), one reduction axis for all "
        "steps (0.48 ms), backtracking by `np.take` on flat indices or over composed pointer pairs "
        "(0.15-0.21 vs 0.12 ms), `torch.eq`-based backpointers (0.47 vs 0.21 ms). Decoding from both "
        "ends at once (50 stacked steps) saves ~0.2 ms of the forward loop but no longer reproduces "
        "torchcrf's rounding, hence not its paths on near-ties; not taken.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = parser.parse_args()
    rows = [measure(1), measure(None)]
    text = section(rows)
    print(text)
    if not args.no_write:
        write_section(SECTION, text, RESULTS)
    return 0 if min(r["ratio"] for r in rows) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
