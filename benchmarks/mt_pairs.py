"""How many TVsub training pairs the device session's ``mt`` part can train on inside its time limit,
from the same call's ``cuda_checks.py`` ``plan_mt`` line (milliseconds per step of each base
translator, measured alone on the device):

    python benchmarks/mt_pairs.py --log session.log --seconds 330 [--size base] [--processes 2]
                                  [--epochs 1] [--pairs auto|N] [--batch-pairs N]

``--processes`` trainings (both encoders x seeds) share the one GPU, so the slower encoder's time
per step, measured alone, is stretched by ``stretch(processes)``; ``OVERHEAD_S`` +
``READ_S_PER_PAIR`` x pairs are left for starting up, reading and building the lattices, the
subword model, validation and decoding the test sets. ``--batch-pairs``: pairs per update when
the spec batches by tokens (the ``gpu`` recipe: ~350; default the size's batch). Prints the count
(a multiple of 1,000, at least 1,000, at most every pair); ``--pairs N`` prints N as given. Exit 2
when the log holds no ``plan_mt`` figures.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mt_results import TVSUB_TRAIN_PAIRS  # noqa: E402

BATCH = {"base": 128, "small": 64}  # the sizes' batches (jsonnet_configs/lib/mt.libsonnet)
# from the H100 session of 2026-11-26 (RESULTS.md, "CUDA checks"): BiG 83 ms/step alone, 113 side by
# side; 26-32 s of each 280,000-pair run outside training; rounded up
SIDE_BY_SIDE = 1.5
#: with more trainings a step is taken to last STRETCH_PER_PROCESS x processes times as long as alone
#: (six small trainings on the H100: 170-190 ms per step each, BiG small alone 54 ms: 3.1-3.6x)
STRETCH_PER_PROCESS = 0.65
OVERHEAD_S = 75.0
READ_S_PER_PAIR = 1e-4
PLAN = re.compile(r"PASS plan_mt .*")


def step_seconds(log: str, size: str = "base") -> float | None:
    """The slower encoder's seconds per step at ``size`` in the log's ``PASS plan_mt`` line, or None."""
    lines = PLAN.findall(log)
    if not lines:
        return None
    figures = [int(ms) for ms in re.findall(rf"\w+ {size}: (\d+) ms/step", lines[-1])]
    return max(figures) / 1000 if figures else None


def stretch(processes: int) -> float:
    """How much longer a step takes with ``processes`` trainings on the GPU than alone."""
    return max(SIDE_BY_SIDE, STRETCH_PER_PROCESS * processes) if processes > 1 else 1.0


def affordable_pairs(per_step: float, seconds: float, epochs: int, size: str = "base", processes: int = 2,
                     batch_pairs: int | None = None) -> int:
    """Pairs per epoch such that every side-by-side training and its overheads fit in ``seconds``."""
    per_pair = epochs * per_step * stretch(processes) / (batch_pairs or BATCH[size]) + READ_S_PER_PAIR
    pairs = math.floor(max(seconds - OVERHEAD_S, 0) / per_pair / 1000) * 1000
    return min(max(pairs, 1000), TVSUB_TRAIN_PAIRS)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--size", choices=list(BATCH), default="base")
    parser.add_argument("--processes", type=int, default=2, help="trainings on the GPU at once")
    parser.add_argument("--pairs", default="auto")
    parser.add_argument("--batch-pairs", type=int, default=None, help="pairs per update (token batches)")
    args = parser.parse_args(argv)
    if args.pairs != "auto":
        print(int(args.pairs))
        return 0
    per_step = step_seconds(Path(args.log).read_text(encoding="utf-8", errors="replace"), args.size)
    if per_step is None:
        print(f"{args.log}: no 'PASS plan_mt' line with {args.size} ms/step figures (run the checks part first, "
              f"MT_SIZE={args.size})", file=sys.stderr)
        return 2
    print(affordable_pairs(per_step, args.seconds, args.epochs, args.size, args.processes, args.batch_pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
