"""Registered optimizers and per-batch learning-rate schedules."""
from __future__ import annotations

import math
import re
from typing import Any, Optional, Sequence

import torch

from multigrain.platform.kinds import Optimizer, Scheduler


def parameter_groups(model_parameters: list, groups: Optional[Sequence] = None) -> list:
    """Torch parameter groups from ``(name, parameter)`` pairs and AllenNLP's ``parameter_groups``:
    a list of ``[[regex, ...], {option: value}]``. A parameter joins the first group one of whose
    regexes matches its name (``re.search``); the others form a last group with the optimizer's
    own options. A regex that matches no parameter is an error (a typo would silently train every
    layer at one rate), and so is an empty group list entry.

    Plain parameters (no names) are passed through as one group, as torch takes them."""
    params = list(model_parameters)
    named = [p for p in params if isinstance(p, tuple)]
    if not groups:
        return [p[1] if isinstance(p, tuple) else p for p in params]
    if len(named) != len(params):
        raise ValueError("parameter_groups needs named parameters")
    members: list[list] = [[] for _ in groups]
    rest = []
    patterns = []
    for i, group in enumerate(groups):
        if not (isinstance(group, (list, tuple)) and len(group) == 2 and isinstance(group[0], (list, tuple))
                and group[0] and isinstance(group[1], dict)):
            raise ValueError(f"parameter_groups[{i}] must be [[regex, ...], {{option: value}}], got {group!r}")
        patterns.append([re.compile(r) for r in group[0]])
    used = [[False] * len(pats) for pats in patterns]
    for name, param in named:
        for i, pats in enumerate(patterns):
            hits = [j for j, pat in enumerate(pats) if pat.search(name)]
            if hits:
                for j in hits:
                    used[i][j] = True
                members[i].append(param)
                break
        else:
            rest.append(param)
    for i, pats in enumerate(patterns):
        for j, pat in enumerate(pats):
            if not used[i][j]:
                example = f" (names look like {named[0][0]!r})" if named else ""
                raise ValueError(f"parameter_groups[{i}]: the regex {pat.pattern!r} matches no parameter name{example}")
    out = [{"params": m, **dict(g[1])} for m, g in zip(members, groups) if m]
    if rest:
        out.append({"params": rest})
    return out


_groups = parameter_groups  # the optimizers' argument of that name shadows the function


@Optimizer.register("sgd")
class SgdOptimizer(Optimizer, torch.optim.SGD):
    def __init__(self, model_parameters: list, lr: float = 0.01, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, parameter_groups: Optional[list] = None):
        super().__init__(_groups(model_parameters, parameter_groups), lr=lr, momentum=momentum,
                         weight_decay=weight_decay, nesterov=nesterov)


class _FusedAdam:
    """Adam-family ``__init__`` whose ``fused=None`` means: the fused kernel wherever torch has one
    (floating-point parameters on the CPU or CUDA). It is one pass per tensor instead of ~10
    ``foreach`` ops: with large embedding tables (MSRA's 291k bigrams x 50) a CPU Adam step takes
    21 ms instead of 156 ms. ``weight_decay=None``: the class's ``weight_decay_default``.
    ``parameter_groups``: per-group options (``parameter_groups`` above), e.g. a lower rate for a
    pretrained backbone than for the layers over it."""

    weight_decay_default = 0.0

    def __init__(self, model_parameters: list, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: Optional[float] = None, fused: Optional[bool] = None,
                 parameter_groups: Optional[list] = None):
        params = _groups(model_parameters, parameter_groups)
        if fused is None:
            tensors = [p for g in params for p in (g["params"] if isinstance(g, dict) else [g])]
            fused = bool(tensors) and all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in tensors)
        weight_decay = self.weight_decay_default if weight_decay is None else weight_decay
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused)


@Optimizer.register("adam")
class AdamOptimizer(_FusedAdam, Optimizer, torch.optim.Adam):
    """``torch.optim.Adam`` (weight decay 0 unless given)."""


@Optimizer.register("adamw")
class AdamWOptimizer(_FusedAdam, Optimizer, torch.optim.AdamW):
    """``torch.optim.AdamW`` (weight decay 0.01 unless given, as torch's)."""

    weight_decay_default = 0.01


class _FactorSchedule(Scheduler, torch.optim.lr_scheduler.LRScheduler):
    """lr = base_lr * factor(step); stepped once per batch."""

    uses_num_training_steps = False  # the rate at a step does not depend on trainer.num_epochs

    def factor(self, step: int) -> float:
        raise NotImplementedError

    def get_lr(self):
        f = self.factor(self.last_epoch)
        return [base * f for base in self.base_lrs]


@Scheduler.register("linear_warmup")
class LinearWarmupDecay(_FactorSchedule):
    """Linear warm-up over ``warmup_steps`` (or ``warmup_fraction`` of training), then linear
    decay to ``final_ratio`` of the base rate at the last step."""

    uses_num_training_steps = True

    def __init__(self, optimizer: Any, num_training_steps: int, warmup_steps: Optional[int] = None,
                 warmup_fraction: float = 0.1, final_ratio: float = 0.0):
        self.total = max(1, num_training_steps)
        self.warmup = warmup_steps if warmup_steps is not None else int(warmup_fraction * self.total)
        self.final_ratio = final_ratio
        super().__init__(optimizer)

    def factor(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / (self.warmup + 1)
        left = max(0.0, (self.total - step) / max(1, self.total - self.warmup))
        return self.final_ratio + (1 - self.final_ratio) * left


@Scheduler.register("inverse_sqrt")
class InverseSqrt(_FactorSchedule):
    """The schedule of "Attention is all you need" (Vaswani et al. 2017, eq. 3), with the peak
    rate given as ``lr`` instead of ``d_model^-0.5 / sqrt(warmup)``. At step ``s`` (0-based,
    counted in batches), with ``w = warmup_steps``::

        lr(s) = lr * min((s + 1) / w, sqrt(w / (s + 1)))

    a linear rise to ``lr`` at ``s + 1 = w``, then decay as ``1 / sqrt(s + 1)``. It never reads the
    run's length, so a run can be extended (``uses_num_training_steps = False``) and a warm-up
    of ``w`` steps is the same in a cut run and a full one. ``warmup_steps`` 0: no warm-up
    (``lr / sqrt(s + 1)``)."""

    def __init__(self, optimizer: Any, num_training_steps: int, warmup_steps: int = 4000):
        if warmup_steps < 0:
            raise ValueError(f"inverse_sqrt: warmup_steps must be >= 0, got {warmup_steps}")
        self.warmup = warmup_steps
        super().__init__(optimizer)

    def factor(self, step: int) -> float:
        n = step + 1
        if self.warmup == 0:
            return n ** -0.5
        return min(n / self.warmup, math.sqrt(self.warmup / n))


@Scheduler.register("step")
class StepDecay(_FactorSchedule):
    """Multiply the rate by ``gamma`` every ``step_size`` batches (default 1000)."""

    def __init__(self, optimizer: Any, num_training_steps: int, step_size: int = 1000, gamma: float = 0.5):
        self.step_size = max(1, step_size)
        self.gamma = gamma
        super().__init__(optimizer)

    def factor(self, step: int) -> float:
        return self.gamma ** (step // self.step_size)


@Scheduler.register("inverse_time")
class InverseTimeDecay(_FactorSchedule):
    """lr_t = lr / (1 + decay * epoch), the schedule of Lattice LSTM and PLTE (per epoch)."""

    def __init__(self, optimizer: Any, num_training_steps: int, steps_per_epoch: int = 1, decay: float = 0.05):
        self.steps_per_epoch = max(1, steps_per_epoch)
        self.decay = decay
        super().__init__(optimizer)

    def factor(self, step: int) -> float:
        return 1.0 / (1.0 + self.decay * math.floor(step / self.steps_per_epoch))
