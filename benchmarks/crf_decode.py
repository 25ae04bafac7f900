"""CRF decoding speed: our batched ``viterbi_decode`` against ``torchcrf.CRF.decode`` on CPU.

B=32 sentences of n=100 characters, K=13 tags (BMES with 3 types), random emissions, full
mask, unconstrained. All must return identical paths. ``viterbi_decode`` runs the compiled
kernel on the CPU; its PyTorch-ops decoder (what a GPU runs) is timed beside it. Median of 30
runs (alternating rounds), with one intra-op thread and with torch's default. Writes the ``## CRF decode`` section of
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

from multigrain.components.heads import crf as crf_module  # noqa: E402
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
        detached = [p.detach() for p in params]
        with torch.no_grad():
            ours = viterbi_decode(emissions, mask, *params)
            torch_ops = crf_module._decode_torch(emissions, mask, *detached)
            theirs = crf.decode(emissions, mask)
            if ours.tolist() != theirs or torch_ops.tolist() != theirs:
                raise AssertionError("viterbi_decode and torchcrf.CRF.decode disagree")
            t_ours, t_ops, t_theirs = median_times([lambda: viterbi_decode(emissions, mask, *params),
                                                    lambda: crf_module._decode_torch(emissions, mask, *detached),
                                                    lambda: crf.decode(emissions, mask)])
        return {"threads": torch.get_num_threads(), "ours": t_ours, "torch_ops": t_ops, "torchcrf": t_theirs,
                "ratio": t_theirs / t_ours, "ops_ratio": t_theirs / t_ops}
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
        f"Kernel: {'compiled' if crf_module._native is not None else 'NOT BUILT (PyTorch fallback)'}.",
        "",
        "| intra-op threads | `viterbi_decode` (CPU kernel) | speed-up | target | PyTorch-ops decoder (GPU path) "
        "| speed-up | `torchcrf.CRF.decode` |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['threads']} | {r['ours'] * 1e3:.3f} ms | **{r['ratio']:.1f}x** | >= {TARGET:.0f}x | "
                     f"{r['torch_ops'] * 1e3:.2f} ms | {r['ops_ratio']:.1f}x | {r['torchcrf'] * 1e3:.2f} ms |")
    lines += [
        "",
        "On the CPU `viterbi_decode` calls `multigrain/components/heads/_viterbi.c` (built by `pip install "
        "-e .`, optional: without a C compiler the PyTorch-ops decoder runs): one pass per step over the "
        "[K, K, B] candidates `(score + transition) + emission`, added in torchcrf's order, the lowest "
        "tag kept on ties, backpointers stored as it goes and traced back per sentence from its own "
        "end; the loop over sentences is innermost and vectorises (SSE2). Equal paths to torchcrf "
        "(random, integer-tied, NaN-padded, float64) and to brute force are tested for both decoders.",
        "",
        "The PyTorch-ops decoder is bound by per-op dispatch (~1-3 us per op here): ~3 small ops per "
        "step (add, amax, add: the minimum that keeps torchcrf's rounding), ~10 large ops for all "
        "backpointers, one indexing step per position to backtrack; it reached 7.5-8.6x and was "
        "the CPU path until the kernel. Tried on it and dropped (2026-11-23): the loop in "
        "TorchScript, numpy ops on the same memory, one reduction axis for all steps, `np.take` or "
        "pointer-pair backtracking, `torch.eq` backpointers, a [n, K, K, B] candidate buffer filled "
        "per step (0.56 vs 0.46 ms: cache misses), decoding from both ends (not torchcrf's rounding).",
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
