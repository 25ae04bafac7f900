"""Checks that need a GPU: the translation and Lattice-BERT code on CUDA, fp32 and bf16, before any
result is measured there (``benchmarks/device_session.sh checks`` runs this on a lent machine).

    python benchmarks/cuda_checks.py [--device cuda] [--runs-dir DIR]

1. ``beam``: beam search (beam 4) of a random-weight translator (``mt_speed.py``'s model, 3+3
   layers of 256, vocabulary 8000, 64 sources) on the device and on the CPU, fp32: each sentence's
   best score agrees to 1e-3 (a near tie may pick another sequence of the same score); the share of
   identical best sequences is printed. Then the same search under bf16 autocast on the device:
   finite scores; the share of best sequences equal to fp32's is printed (not asserted: bf16 moves
   near ties).
2. ``lattice_bert``: a Lattice-BERT encoder (tiny sizes, random weights) on the device equals the CPU
   to 1e-4 (fp32, relative norm) and to 3e-2 under bf16 autocast.
3. ``train_mt``: a tiny translator (Tatoeba, 200 pairs, one test set) trained through ``Run``
   with ``trainer.mixed_precision: bf16`` on the device, no MLflow: the run finishes, its losses
   are finite, ``metrics.json`` names the device.
4. ``plan_mt`` / ``plan_lb``: the same kind of training checks, sized to measure the session's
   budgets instead of guessing them: time per step of the two translators (``--mt-size``, base by
   default; 6,400 TVsub pairs each, after an untimed warm-up training) and characters/s of the two
   tiny pre-trainings (200,000 characters each), projected to one epoch of all 429,501 pairs and of
   the whole 10.8M-character corpus (choose MT_EPOCHS / LB_CHARS of device_session.sh from these
   lines).

One line per check (PASS/FAIL and its figures); exit status 1 when one fails. ``--device cpu`` runs
1-2 against the CPU itself and 3-4 in fp32 on smaller cuts (a test of this script, not of a GPU).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import mt_speed  # noqa: E402


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def autocast(device: torch.device, on: bool):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=on)


def decode(model, source: torch.Tensor, bf16: bool = False):
    device = source.device
    with torch.inference_mode(), autocast(device, bf16):
        mask = source != mt_speed.PAD
        states = model.encoder(model.embedding(source), mask)
        max_lengths = torch.full((source.shape[0],), 30, dtype=torch.long, device=device)
        found = model.decoder.decode(states, mask, max_lengths, beam_size=4)
    return found.best.cpu(), found.scores[:, 0].float().cpu()


def check_beam(device: torch.device, _runs: Path) -> str:
    torch.manual_seed(0)
    a = argparse.Namespace(vocab=8000, d_model=256, layers=3, heads=4, ffn=1024)
    model = mt_speed.Ours(a).eval()
    source = torch.randint(4, a.vocab, (64, 20))
    cpu_best, cpu_scores = decode(model, source)
    best, scores = decode(model.to(device), source.to(device))
    gap = float((scores - cpu_scores).abs().max())
    same = sum(torch.equal(x, y) for x, y in zip(best, cpu_best)) / len(best)
    assert gap < 1e-3, f"best scores differ by {gap:.2e}"
    bf16_best, bf16_scores = decode(model, source.to(device), bf16=True)
    assert torch.isfinite(bf16_scores).all(), "bf16 scores not finite"
    same_bf16 = sum(torch.equal(x, y) for x, y in zip(bf16_best, best)) / len(best)
    return (f"max best-score gap {gap:.1e}, identical best sequences {same:.0%}; bf16 autocast: "
            f"{same_bf16:.0%} identical to fp32, mean best score {float(bf16_scores.mean()):.3f} vs "
            f"{float(scores.mean()):.3f}")


def check_lattice_bert(device: torch.device, _runs: Path) -> str:
    from multigrain.components.encoders.lattice_bert import LatticeBertEncoder
    from multigrain.components.lattice.types import Lattice, LatticeBatch
    from multigrain.platform.devices import move_to

    torch.manual_seed(0)
    text = list("研究生活很充实我们在北京大学读书")
    words = [[(0, 1), (1, 2), (0, 2), (4, 5), (9, 12), (11, 12)], [(1, 2), (3, 4)]]
    lattices = [Lattice.from_words(text, words[0]), Lattice.from_words(text[:7], words[1])]
    batch = {"lattice": LatticeBatch.collate(lattices, lambda t, c: 2 + len(t))}
    encoder = LatticeBertEncoder(128, hidden_size=256, num_layers=4, num_heads=4, dropout=0.0,
                                 attention_dropout=0.0).eval()
    inputs = torch.randn(*batch["lattice"].mask.shape, 128)
    with torch.inference_mode():
        expected = encoder(inputs, batch["lattice"].mask, batch)
        batch_d = move_to(batch, device)
        encoder.to(device)
        got = encoder(inputs.to(device), batch_d["lattice"].mask, batch_d).cpu()
        with autocast(device, True):
            got_bf16 = encoder(inputs.to(device), batch_d["lattice"].mask, batch_d).float().cpu()
    fp32, bf16 = relative(got, expected), relative(got_bf16, expected)
    assert fp32 < 1e-4 and bf16 < 3e-2, f"relative error fp32 {fp32:.1e}, bf16 {bf16:.1e}"
    return f"relative error vs CPU: fp32 {fp32:.1e}, bf16 autocast {bf16:.1e}"


def train(spec: dict, run_dir: Path) -> dict:
    """A fresh training (an earlier check's run directory is removed, not reused)."""
    from multigrain.platform.runs import Run

    shutil.rmtree(run_dir, ignore_errors=True)
    result = Run(spec, run_dir).train_or_reuse(logger=None)
    assert result.get("finished"), f"{run_dir}: did not finish"
    losses = [e["train_loss"] for e in result["history"]]
    assert all(math.isfinite(x) for x in losses), f"train losses {losses}"
    return result


def on_device(spec: dict, device: torch.device) -> dict:
    spec["trainer"]["cuda_device"] = 0 if device.type == "cuda" else -1
    if device.type == "cuda":
        spec["trainer"]["mixed_precision"] = "bf16"
    return spec


def check_train_mt(device: torch.device, runs: Path) -> str:
    import mt_results

    result = train(on_device(mt_results.tiny_tatoeba_spec(200, 50, 50), device), runs / "train_mt")
    bleu = result["test_sets"]["tatoeba"]["metrics"]["bleu"]
    return f"device {result['device']!r}, train loss {result['history'][-1]['train_loss']:.3f}, test BLEU {bleu:.2f}"


def check_plan_mt(device: torch.device, runs: Path, size: str = "base") -> str:
    """Time per step of both translators of ``size``, projected to one epoch of every TVsub pair."""
    import mt_results

    pairs = 6400 if device.type == "cuda" else 128
    lines = []
    # untimed first: the first base training in a process ran 4x slower per step on an H100 (2026-11-26)
    warm_up = (("transformer", False),) if device.type == "cuda" else ()
    for encoder, timed in (*warm_up, *((e, True) for e in mt_results.ENCODERS)):
        spec = mt_results.prepared_spec(encoder, size, 13, epochs=1, max_train_pairs=pairs if timed else 640,
                                        test_sets=())
        spec["validation_dataset_reader"]["max_instances"] = 32
        result = train(on_device(spec, device), runs / f"plan_{encoder}{'' if timed else '_warm_up'}")
        if not timed:
            continue
        batch = spec["data_loader"]["batch_size"]
        per_step = result["training_seconds"] / math.ceil(pairs / batch)
        pairs_all = mt_results.TVSUB_TRAIN_PAIRS
        lines.append(f"{encoder} {size}: {per_step * 1000:.0f} ms/step, one epoch of {pairs_all:,} pairs "
                     f"~{per_step * math.ceil(pairs_all / batch) / 60:.1f} min")
    return "; ".join(lines)


def check_plan_lb(device: torch.device, runs: Path) -> str:
    """Characters/s of both tiny pre-trainings, projected to the whole corpus."""
    import lattice_bert

    chars = 200_000 if device.type == "cuda" else 10_000
    lines = []
    for name in ("lattice_bert", "char_bert"):
        spec = lattice_bert.pretrain_spec(name, "tiny", chars, 1, None)
        spec["validation_dataset_reader"]["max_instances"] = 32
        result = train(on_device(spec, device), runs / f"plan_{name}")
        rate = chars / result["training_seconds"]
        lines.append(f"{name} tiny: {rate:,.0f} chars/s, the whole corpus ({lattice_bert.CORPUS_CHARS:,}) "
                     f"~{lattice_bert.CORPUS_CHARS / rate / 60:.1f} min")
    return "; ".join(lines)


CHECKS = {"beam": check_beam, "lattice_bert": check_lattice_bert, "train_mt": check_train_mt,
          "plan_mt": check_plan_mt, "plan_lb": check_plan_lb}


@contextlib.contextmanager
def working_directory(path: Path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--checks", nargs="*", choices=list(CHECKS), default=list(CHECKS))
    parser.add_argument("--runs-dir", default=None, help="where the two trainings write (default: a temp folder)")
    parser.add_argument("--mt-size", choices=("base", "small"), default="base", help="the translators plan_mt times")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        return 2
    checks = dict(CHECKS, plan_mt=functools.partial(check_plan_mt, size=args.mt_size))
    failed = 0
    # the specs' data paths are relative to the repository root
    with tempfile.TemporaryDirectory() as tmp, working_directory(ROOT):
        runs = Path(args.runs_dir or tmp)
        for name in args.checks:
            started = time.perf_counter()
            try:
                detail = checks[name](device, runs)
                status = "PASS"
            except Exception as error:  # every check runs; the failure is reported, not raised
                traceback.print_exc()
                detail, status = f"{type(error).__name__}: {error}", "FAIL"
                failed += 1
            print(f"{status} {name} ({time.perf_counter() - started:.1f} s): {detail}", flush=True)
    print(f"{len(args.checks) - failed} of {len(args.checks)} checks passed on {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
