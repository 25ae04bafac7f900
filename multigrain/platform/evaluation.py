"""A model's metrics over a set of evaluation batches: ``evaluate`` (the metrics, with the mean
loss when the data has labels) and ``evaluate_counted`` (also the number of instances the model
scored). Used by the training loop's validation, a run's final evaluation of ``best.pt``, and
``multigrain evaluate`` on an archive; ``check_model_reads`` tries each evaluation reader's first
examples on the model before the first epoch.
"""
from __future__ import annotations

from typing import Optional

import torch

from multigrain.platform.batching import BatchIterator
from multigrain.platform.checkpoints import rng_state, set_rng_state
from multigrain.platform.devices import move_to
from multigrain.platform.errors import ConfigurationError, DataError, MultigrainError
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


def check_model_reads(model: Model, splits: dict, first: int = 2, train: Optional[list] = None,
                      suspects: str = "") -> None:
    """One forward pass, in evaluation mode and without gradients, over the first ``first``
    examples of each evaluation split (``splits``: the spec path of its reader -> its instances),
    before the first epoch: a reader that gives the model other fields than the training reader
    (a validation reader without the segmenter the model reads) fails here, in seconds, rather
    than at the first validation or at the final test after hours. The first ``train`` examples
    go first: a model that fails on those is at fault itself (``suspects``: its plugin components),
    not a reader. The random states, the model's mode and its metric counts are left as they
    were, so the run trains as without it."""
    states = rng_state()
    was_training = model.training
    try:
        e = _first_failure(model, train or [], first)
        if e is not None:
            raise ConfigurationError(f"model: the model cannot run on the first training examples "
                                     f"({type(e).__name__}: {e}); the fault is in its components or their "
                                     f"options{suspects}") from None
        for where, instances in splits.items():
            e = _first_failure(model, instances, first)
            if e is None:
                continue
            fields = ", ".join(sorted(instances[0])) if isinstance(instances[0], dict) else type(instances[0]).__name__
            hint = "" if isinstance(e, MultigrainError) else (
                ". Give this reader the options of dataset_reader that the model needs (a segmenter or "
                "lattice builder, for instance)")
            raise ConfigurationError(f"{where}: the model cannot evaluate this reader's first examples "
                                     f"({type(e).__name__}: {e}); they hold the fields {fields}{hint}") from None
    finally:
        model.get_metrics(reset=True)
        model.train(was_training)
        set_rng_state(states)


def _first_failure(model: Model, instances: list, first: int) -> Optional[Exception]:
    """What the model raised on the first ``first`` of ``instances`` (None: it read them); a bad
    example's own error (it names the file and line) is raised."""
    if not instances:
        return None
    batches = BatchIterator(instances[:first], model.tensorize, model.instance_length, batch_size=first,
                            shuffle=False, seed=0, noise=0.0)
    try:
        with torch.no_grad():
            model.eval()
            for _, batch in batches.epoch(0):
                model(**batch)
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 - the caller says whose fault it is
        return e
    return None
