"""A model's metrics over a set of evaluation batches: ``evaluate`` (the metrics, with the mean
loss when the data has labels) and ``evaluate_counted`` (also the number of instances the model
scored). Used by the training loop's validation, a run's final evaluation of ``best.pt``, and
``multigrain evaluate`` on an archive.
"""
from __future__ import annotations

import torch

from multigrain.platform.batching import BatchIterator
from multigrain.platform.devices import move_to
from multigrain.platform.kinds import Model
from multigrain.platform.progress import progress


def evaluate(model: Model, batches: BatchIterator, device: torch.device, desc: str = "evaluate") -> dict[str, float]:
    """Metrics of ``model`` over every batch (mean loss included when the data has labels)."""
    return evaluate_counted(model, batches, device, desc)[0]


@torch.no_grad()
def evaluate_counted(model: Model, batches: BatchIterator, device: torch.device,
                     desc: str = "evaluate") -> tuple[dict[str, float], int]:
    """(``evaluate``'s metrics, the number of instances the model scored)."""
    model.eval()
    model.get_metrics(reset=True)
    total_loss, n_batches, scored = 0.0, 0, 0
    for chunk, batch in progress(batches.epoch(0), total=batches.num_batches(0), desc=desc):
        out = model(**move_to(batch, device))
        scored += len(chunk)
        if "loss" in out:
            total_loss += float(out["loss"])
            n_batches += 1
    metrics = dict(model.get_metrics(reset=True))
    if n_batches:
        metrics["loss"] = total_loss / n_batches
    return metrics, scored
