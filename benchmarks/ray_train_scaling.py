"""One process vs N Ray Train workers on the same spec and global batch.

Trains the spec once in this process and once with ``trainer.workers = N`` (a local Ray started
here, gloo on CPU) into fresh run directories, and prints per run: the wall time of ``Run.train``
(Ray Train's start-up included), the seconds of the epochs alone (``training_seconds``), the
per-epoch training losses and the largest relative difference between the two loss curves.

    python benchmarks/ray_train_scaling.py                      # the Ray Train test's tiny BiLSTM-CRF
    python benchmarks/ray_train_scaling.py --spec jsonnet_configs/ner/resume_quickstart.jsonnet --workers 2
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tiny_tagger_spec(folder: Path) -> dict:
    """The spec of ``tests/platform/distributed/test_ray_train.py``: a BiLSTM-CRF on 11 Resume
    sentences, global batch 5, 3 epochs."""
    from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec

    src = ROOT.parent / "shared" / "data" / "resume_ner" / "dev.char.bmes"
    folder.mkdir(parents=True, exist_ok=True)
    train = copy_sentences(src, folder / "train.bmes", 11)
    dev = copy_sentences(src, folder / "dev.bmes", 15, start=11)
    return tiny_spec(bilstm_tagger(hidden=8, dim=8, dropout=0.0), {"type": "resume_ner"}, train, dev, dev,
                     epochs=3, batch_size=5, lr=0.02, task="ner")


def timed(spec: dict, run_dir: Path) -> dict:
    from multigrain.platform.ray.train import RayTrainCluster
    from multigrain.platform.runs import Run

    started = time.perf_counter()
    result = Run(spec, run_dir).train(data_parallel=RayTrainCluster().launcher)
    return {"wall_s": time.perf_counter() - started, "epochs_s": result["training_seconds"],
            "losses": [h["train_loss"] for h in result["history"]], "device": result["device"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", help="a spec file (default: the Ray Train test's tiny tagger)")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("MULTIGRAIN_QUIET", "1")
    import ray

    from multigrain.platform.specs import load_spec

    with tempfile.TemporaryDirectory(prefix="ray-train-scaling-") as tmp:
        tmp = Path(tmp)
        spec = load_spec(args.spec, args.override) if args.spec else tiny_tagger_spec(tmp / "data")
        one = timed(spec, tmp / "one")
        ray.init(address="local", num_cpus=args.workers, include_dashboard=False, log_to_driver=False,
                 object_store_memory=80 * 1024 * 1024)
        try:
            many = timed({**spec, "trainer": {**spec["trainer"], "workers": args.workers}}, tmp / "many")
        finally:
            ray.shutdown()
    gap = max(abs(a - b) / abs(a) for a, b in zip(one["losses"], many["losses"]))
    print(json.dumps({"spec": args.spec or "tiny tagger (test_ray_train.py)", "cpus": os.cpu_count(),
                      "machine": platform.processor() or platform.machine(), "one_process": one,
                      f"{args.workers}_workers": many, "max_relative_loss_difference": gap}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
