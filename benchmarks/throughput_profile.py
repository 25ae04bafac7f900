"""What the training thread does in each system's measured steps (``train_throughput.py --profile``):
one more run of the measured steps of ``ours`` and of ``bare`` under ``torch.profiler``, summarised
as operator counts and host seconds per step, and what ours does that bare does not.

The question it answers is the one the H200 left (benchmarks/RESULTS.md, "Trainer throughput on a
GPU"): where a step is bound by the host launching kernels, ours reached 0.85 of the bare loop, and
building the batches on the prefetching thread was not all of the gap. The profiler records the
operators of the thread that runs the steps (not the prefetching thread's, which it does not follow)
and, on CUDA, every kernel on the device, so a row says per step:

- ``host_ms``: the training thread's self CPU time of its operators and runtime calls;
- ``calls``: how often each operator or runtime call ran (``cudaLaunchKernel``, ``cudaMemcpyAsync``,
  ``cudaStreamSynchronize``, ``aten::_local_scalar_dense`` (a read of a device value), ...);
- ``device_busy``: on CUDA, the kernels' time over the profiled wall-clock time (1.0: the GPU never
  waited for the host);
- ``extra`` and ``more_calls``: the operators where ours spends more host time per step than bare,
  and those it calls more often, largest difference first.
"""
from __future__ import annotations

import contextlib
import time

import torch

#: the counts a row always gives (0 where none ran), beside the top operators
WATCHED = ("aten::_local_scalar_dense", "aten::item", "aten::copy_", "aten::to", "aten::pin_memory",
           "cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize")
TOP = 15


class Recorder:
    """A context for ``Setup.ours(around=...)`` / ``Setup.bare(around=...)``: profiles what runs inside
    it (the measured steps) and keeps the trace's per-operator averages."""

    def __init__(self, device: torch.device):
        self.device = device
        self.events = None
        self.wall = 0.0

    @contextlib.contextmanager
    def __call__(self):
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        with profile(activities=activities) as prof:
            start = time.perf_counter()
            yield
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.wall = time.perf_counter() - start
        self.events = prof.key_averages()


def summary(recorder: Recorder, steps: int) -> tuple[dict, dict, dict]:
    """The row (per step: host milliseconds, the calls of ``WATCHED`` and of the ``TOP`` operators by
    host time, the device's busy share on CUDA), and each operator's host ms and calls per step."""
    events = recorder.events
    host = {e.key: e.self_cpu_time_total / 1e3 / steps for e in events}  # microseconds -> ms per step
    calls = {e.key: e.count / steps for e in events}
    top = sorted(host, key=host.get, reverse=True)[:TOP]
    row = {"steps": steps, "wall_ms": round(1e3 * recorder.wall / steps, 3),
           "host_ms": round(sum(host.values()), 3),
           "calls": {k: round(calls.get(k, 0.0), 2) for k in WATCHED},
           "top": [{"op": k, "host_ms": round(host[k], 3), "calls": round(calls[k], 2)} for k in top]}
    if recorder.device.type == "cuda":
        kernels = sum(e.self_device_time_total for e in events) / 1e6  # microseconds -> seconds
        row["device_busy"] = round(kernels / recorder.wall, 3) if recorder.wall else None
    return row, host, calls


def compare(ours: Recorder, bare: Recorder, steps: int) -> dict:
    """Both systems' summaries; ``extra``: the operators where ours spends more host time per step
    than bare, largest difference first; ``more_calls``: those ours calls more often per step (work
    bare does not do, where ``extra`` also holds the same work done slower)."""
    (o_row, o_host, o_calls), (b_row, b_host, b_calls) = summary(ours, steps), summary(bare, steps)
    gaps = {k: o_host[k] - b_host.get(k, 0.0) for k in o_host}
    extra = [{"op": k, "extra_host_ms": round(gaps[k], 3), "ours_calls": round(o_calls[k], 2),
              "bare_calls": round(b_calls.get(k, 0.0), 2)}
             for k in sorted(gaps, key=gaps.get, reverse=True)[:TOP] if gaps[k] > 0]
    more = {k: o_calls[k] - b_calls.get(k, 0.0) for k in o_calls}
    more_calls = [{"op": k, "ours_calls": round(o_calls[k], 2), "bare_calls": round(b_calls.get(k, 0.0), 2)}
                  for k in sorted(more, key=more.get, reverse=True)[:TOP] if more[k] > 0]
    return {"ours": o_row, "bare": b_row, "extra": extra, "more_calls": more_calls}


def profile(setup, steps: int) -> dict:
    """``compare`` of one more run of ``setup``'s measured steps by ours and by bare; where the
    profiler fails (a device machine without CUPTI, say), why, and the timings stay as measured."""
    ours, bare = Recorder(setup.device), Recorder(setup.device)
    try:
        setup.ours(around=ours)
        setup.bare(around=bare)
    except RuntimeError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return compare(ours, bare, steps)
