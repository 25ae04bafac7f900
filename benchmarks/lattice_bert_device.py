"""The device call of ``lattice_bert.py`` (``benchmarks/device_session.sh lb``): the pre-training
budget that fits the call (``fit_budget``), and the pre-trained models' weights out of the device
machine (``export_weights``) and into this one (``import_weights``) through ``weights_pack``."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lattice_bert import CORPUS_CHARS, pretrain_all

STARTED = time.time()  # imported at the start of lattice_bert.main


def fit_budget(args, seconds: float, probe_chars: int, margin: float) -> tuple[int, dict]:
    """The most characters (at most the whole corpus) that the ``--models`` pre-trainings, run as
    the real ones will be (``--side-by-side``, batch, precision), can read and train on so that
    they end ``margin`` seconds before ``seconds`` from this process's start. Measured by a probe
    of ``probe_chars`` characters each: its reading rate ``r_read`` (timed alone first), its
    training rate ``r_train`` (``training_seconds``, validation included) and the rest of its wall
    time ``fixed`` (start-up, lexicon, vocabulary); a run of B characters takes
    ``fixed + B / r_read + B / r_train``, and the slowest model decides."""
    probe = argparse.Namespace(**dict(vars(args), chars_budget=probe_chars, runs_dir=str(Path(args.runs_dir) / "probe"),
                                      corpus_stats=False, throughput_batches=0, probe=True))
    rows = pretrain_all(probe)
    left = seconds - (time.time() - STARTED) - margin
    plan, per_char, fixed = {}, 0.0, 0.0
    for name, r in rows.items():
        train_rate = probe_chars / r["training_seconds"]
        read_rate = probe_chars / max(r["read_seconds"], 1e-6)
        rest = max(0.0, r["wall_seconds"] - r["training_seconds"] - r["read_seconds"])
        plan[name] = {"train_chars_per_s": round(train_rate), "read_chars_per_s": round(read_rate),
                      "fixed_s": round(rest, 1)}
        if 1 / read_rate + 1 / train_rate > per_char:
            per_char, fixed = 1 / read_rate + 1 / train_rate, rest
    budget = int(round(min(CORPUS_CHARS, max(0.0, left - fixed) / per_char), 3))  # 4999999.9999: 5000000
    plan.update(seconds_left=round(left, 1), budget=budget, corpus_share=round(budget / CORPUS_CHARS, 3))
    print(f"fit: {json.dumps(plan)}", flush=True)
    if budget < probe_chars:
        raise SystemExit(f"fit: {left:.0f} s left hold {budget} characters, fewer than the probe's {probe_chars}")
    return budget, plan


def export_weights(pretrained: dict, out: Path) -> list:
    """The pre-trained models' weights (bf16, parts of at most 16 MiB, at most 8 files) into
    ``out``, for ``--import-weights`` on another machine (``weights_pack``)."""
    import weights_pack

    files = weights_pack.pack({name: Path(r["run_dir"]) for name, r in pretrained.items()}, out)
    listed = [{"file": p.name, "bytes": p.stat().st_size} for p in files]
    print(f"exported {len(files)} files to {out}: {listed}", flush=True)
    return listed


def import_weights(report: dict, pack_dir: Path, runs_dir: Path) -> dict:
    """The models of a pack (``--export-weights`` on a device machine) as pre-training run
    directories under ``runs_dir/imported``; their rows of the report keep the device's figures."""
    import weights_pack

    runs = weights_pack.unpack(pack_dir, runs_dir / "imported")
    pretrained = report.get("pretraining") or {}
    for name, run_dir in runs.items():
        pretrained.setdefault(name, {})["run_dir"] = str(run_dir)
        print(f"imported {name} into {run_dir}", flush=True)
    return pretrained
