"""One process's part in a data-parallel training of W replicas of a model (``torch.distributed``
initialised by the launcher, e.g. Ray Train; see ``platform/ray/train.py``).

Every replica iterates the same global batches (their order depends only on seed and epoch) and
takes a contiguous slice of each: replica r of W gets items ``[n*r//W, n*(r+1)//W)`` of a batch of
n, so slices differ in size by at most one. A replica whose slice is empty (n < W) runs the
batch's first item with weight 0, so that it still takes part in the gradient all-reduce.

Exactness. The single-process step minimises the model's ``loss`` over the whole batch. When that
loss is a mean over the batch's instances (a CRF's sentence mean, a classifier's cross-entropy),

    L = (1/n) sum_i l_i = sum_r (n_r/n) L_r,    so    grad L = sum_r (n_r/n) grad L_r,

and replica r back-propagates ``W * (n_r/n) * L_r``: DDP's all-reduce averages (divides by W) and
leaves exactly ``grad L`` on every replica. A model whose loss is a mean over other units (tokens,
masked positions, windows) says so by returning ``loss_count`` (how many units ``loss`` averages,
a number or a 0-d tensor) from ``forward``; the weights are then ``c_r / sum_r c_r`` (one extra
scalar all-reduce per step) and the equality is again exact. Without ``loss_count`` such a loss is
weighted by instances: still an unbiased step, but not the single-process one. A loss that is a
sum of means over different units (a pre-training's masked-token mean plus its sentence-pair
mean) returns ``loss_terms``, ``{name: (mean, count)}`` summing to ``loss``; each term is then
weighted by its own ``c_r / sum_r c_r`` (one all-reduce of the counts). What remains are
float differences (summation order, padding to a slice's longest item instead of the batch's).

The run (``runs.Run``) knows no launcher: whoever trains a spec with ``trainer.workers`` above 1
hands it a ``DataParallel`` (``multigrain train``, a sweep trial: Ray Train's,
``RayTrainCluster(...).launcher``), which makes the run's ``Launcher``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Protocol

import torch


class Launcher(Protocol):
    """The W replicas of one run's training (``platform/ray/train.py``'s ``Replicas``): they train
    its epochs into the run directory (``best.pt``, ``last.pt``) while the run does the rest."""

    @property
    def device(self) -> torch.device:
        """The kind of device each replica trains on (checked against the ``trainer`` section)."""

    def train(self, resume: bool, stop_after_epoch: Optional[int], live,
              epoch_lines: bool = True) -> tuple[dict, bool, float]:
        """(the trainer's summary, finished, training seconds of earlier calls); every epoch goes to
        ``live`` (``live_log.LiveLog``) as it ends."""

    def describe(self) -> str:
        """Where the run trained, for its results."""


#: makes a run's launcher: (the ``runs.Run``, its ``trainer.workers``) -> ``Launcher``
DataParallel = Callable[[Any, int], Launcher]


class Replica:
    """This process's rank among ``world_size`` replicas, its device, and the collectives the
    trainer needs. ``wrap`` turns the model into the module whose backward all-reduces the
    gradients (``DistributedDataParallel``)."""

    def __init__(self, rank: int, world_size: int, device: torch.device,
                 wrap: Callable[[torch.nn.Module], torch.nn.Module]):
        self.rank, self.world_size, self.device, self.wrap = rank, world_size, device, wrap

    @property
    def chief(self) -> bool:
        """Rank 0: validates, writes the checkpoints and reports the epochs."""
        return self.rank == 0

    def part(self, indices: list[int]) -> tuple[list[int], float]:
        """(this replica's slice of a global batch, its share n_r/n of the batch)."""
        n = len(indices)
        start, end = n * self.rank // self.world_size, n * (self.rank + 1) // self.world_size
        if start == end:
            return indices[:1], 0.0
        return indices[start:end], (end - start) / n

    def loss_weight(self, share: float, output: dict) -> float:
        """The weight w_r of this replica's loss in the batch's loss (sum_r w_r = 1)."""
        count = output.get("loss_count")
        if count is None:
            return share
        local = float(count) if share > 0 else 0.0
        total = self.sum([local])[0]
        return local / total if total > 0 else 0.0

    def weighted_loss(self, share: float, output: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(what this replica back-propagates, ``W * sum_terms w_r L_r``; its part of the batch's
        loss, ``sum_terms w_r L_r``, for the epoch's mean: a float64 0-d tensor on the device, read
        by the trainer only where it syncs anyway)."""
        terms = output.get("loss_terms")
        if terms is None:
            weight = self.loss_weight(share, output)
            return output["loss"] * (weight * self.world_size), output["loss"].detach().double() * weight
        losses = [loss for loss, _ in terms.values()]
        local = [float(count) if share > 0 else 0.0 for _, count in terms.values()]
        totals = self.sum(local)
        weighted = sum((loss * (c / t if t > 0 else 0.0) for loss, c, t in zip(losses, local, totals)),
                       losses[0] * 0.0)  # a tensor even when no replica has a unit of any term
        return weighted * self.world_size, weighted.detach().double()

    # collectives --------------------------------------------------------------
    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over replicas (float64)."""
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every replica."""
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, device=self.device if self.device.type == "cuda" else None)
        return box[0]

    def gather(self, obj: Any) -> list:
        """Every replica's ``obj``, in rank order, on every replica."""
        import torch.distributed as dist

        out: list = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out
