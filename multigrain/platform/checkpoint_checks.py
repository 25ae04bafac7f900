"""Checking a ``last.pt`` against the trainer that would continue from it (``checkpoints.restore``
calls ``check_training_state`` before it applies anything): every entry a resume needs, of the
right type, range and shape for the run - counters and history, the step inside an epoch, the
model's tensors, the optimizer's groups and per-parameter state, the scheduler's settings, the
averaged weights, the gradient scaler, every RNG state (each set on a throwaway generator). The
first thing wrong is one ``Damaged`` (entry, problem), which ``check_training_state`` turns into a
ConfigurationError naming the file.

torch is imported inside the functions (``multigrain --help`` imports ``archive``, which imports
``checkpoints``, which imports this module).
"""
from __future__ import annotations

import math
from pathlib import Path

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.weights import describe, tensor_dict

#: the entries of ``last.pt`` a resume needs (``seconds``, ``grad_scaler`` and ``replica_rng``
#: came later and may be absent)
REQUIRED = ("model", "optimizer", "scheduler", "moving_average", "epoch", "best", "best_epoch", "bad_epochs",
            "history", "rng")
#: the entries of a torch LRScheduler's state that change as it steps; the others are its settings,
#: which must be the spec's (a scheduler class may name more in ``checkpoint_dynamic_keys``)
SCHEDULER_DYNAMIC = {"last_epoch", "_step_count", "_last_lr", "_get_lr_called_within_step", "_is_initial"}
#: per-parameter optimizer state entries that have the parameter's shape
PARAM_SHAPED = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg", "acc_delta", "sum",
                "grad_avg", "ax", "exp_inf", "prev"}


def numpy_state(state) -> tuple:
    """A checkpoint's NumPy RNG entry (its keys a tensor or a list) as ``np.random.set_state`` takes it."""
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, cached = state
    keys = keys.cpu().numpy() if isinstance(keys, torch.Tensor) else np.asarray(keys)
    return kind, keys.astype(np.uint32), pos, has_gauss, cached


class Damaged(Exception):
    """One thing wrong with an entry of a checkpoint (``entry``: where, ``problem``: what)."""

    def __init__(self, entry: str, problem: str):
        super().__init__(f"{entry}: {problem}" if entry else problem)


def check_training_state(state: dict, path: Path, trainer) -> None:
    """ConfigurationError ``{path}: damaged training checkpoint: {entry}: {problem}`` for the first
    entry of ``last.pt`` that the ``trainer`` could not continue from."""
    missing = [k for k in REQUIRED if k not in state]
    if missing:
        raise ConfigurationError(f"{path}: not a training checkpoint (no {', '.join(missing)})")
    try:
        _check_counters(state, trainer.config.num_epochs)
        _check_step(state, trainer)
        tensor_dict(state["model"], path, entry="model")
        _check_optimizer(state["optimizer"], trainer.optimizer, trainer.scheduler is not None)
        if trainer.scheduler is not None:
            _check_scheduler(state["scheduler"], trainer.scheduler)
            rates = state["scheduler"].get("_last_lr")  # the rates the scheduler last set: the groups' rates
            for i, group in enumerate(state["optimizer"]["param_groups"] if isinstance(rates, list) else ()):
                if i < len(rates) and not _same(group["lr"], rates[i]):
                    raise Damaged(f"optimizer.param_groups[{i}].lr", f"is {group['lr']!r}, the scheduler's last "
                                                                     f"rate {rates[i]!r}")
        if trainer.average is not None:
            _check_average(state["moving_average"], trainer.average)
        if trainer.precision.scaler is not None and state.get("grad_scaler"):
            _conform(state["grad_scaler"], trainer.precision.state_dict(), "grad_scaler", constants=False)
        _check_rng(state["rng"], "rng")
        replicas = state.get("replica_rng")
        if replicas is not None:
            if not isinstance(replicas, (list, tuple)):
                raise Damaged("replica_rng", f"is {describe(replicas)}, expected a list of RNG states")
            for rank, rng in enumerate(replicas):
                _check_rng(rng, f"replica_rng[{rank}]")
    except Damaged as e:
        raise ConfigurationError(f"{path}: damaged training checkpoint: {e}") from None


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _in_range(entry: str, value, low: int, high: int, why: str = "") -> None:
    if not _int(value) or not low <= value <= high:
        raise Damaged(entry, f"is {describe(value)}, expected an int in {low}..{high}{why}")


def _check_counters(state: dict, num_epochs: int) -> None:
    epoch = state["epoch"]
    _in_range("epoch", epoch, 0, num_epochs, " (trainer.num_epochs of the spec)")
    history = state["history"]
    if not isinstance(history, list):
        raise Damaged("history", f"is {describe(history)}, expected a list of one record per epoch")
    if len(history) != epoch:
        raise Damaged("history", f"holds {len(history)} records for {epoch} epochs")
    for i, record in enumerate(history):
        if not isinstance(record, dict) or not _int(record.get("epoch")) or record["epoch"] != i + 1:
            raise Damaged(f"history[{i}]", f"is {describe(record)}, expected the record of epoch {i + 1}")
        for key, value in record.items():
            if not isinstance(key, str) or not (value is None or isinstance(value, (int, float, str))
                                                or _tensor(value) and value.numel() == 1):
                raise Damaged(f"history[{i}]", f"{key!r} is {describe(value)}, expected a number")
    best, best_epoch = state["best"], state["best_epoch"]
    if best is not None and not _number(best):
        raise Damaged("best", f"is {describe(best)}, expected a number or null")
    if best_epoch is not None or epoch and best is not None:
        _in_range("best_epoch", best_epoch, 1, epoch)
    _in_range("bad_epochs", state["bad_epochs"], 0, epoch)
    seconds = state.get("seconds")
    if seconds is not None and not (_number(seconds) and 0 <= seconds < math.inf):
        raise Damaged("seconds", f"is {describe(seconds)}, expected a number of seconds")


def _check_step(state: dict, trainer) -> None:
    """A checkpoint written inside an epoch: the steps done in it, fewer than the epoch's batches,
    and their finite loss sum."""
    step = state.get("step_in_epoch")
    if not step:
        return
    epoch = state["epoch"]
    if epoch >= trainer.config.num_epochs:
        raise Damaged("step_in_epoch", f"is {describe(step)}, but all {epoch} epochs are done")
    if trainer.replica is not None:
        raise Damaged("step_in_epoch", f"is {describe(step)}: a data-parallel training continues only from the "
                                       f"end of an epoch")
    _in_range("step_in_epoch", step, 0, trainer.train_data.num_batches(epoch) - 1,
              f" (the batches of epoch {epoch + 1})")
    loss = state.get("epoch_loss")
    if not (_number(loss) and math.isfinite(loss)):
        raise Damaged("epoch_loss", f"is {describe(loss)}, expected the finite loss sum of the epoch's steps")


def _tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _check_optimizer(saved, optimizer, scheduled: bool) -> None:
    fresh = optimizer.state_dict()
    if not isinstance(saved, dict) or not isinstance(saved.get("state"), dict) \
            or not isinstance(saved.get("param_groups"), list):
        raise Damaged("optimizer", f"is {describe(saved)}, expected a dict of 'state' and 'param_groups'")
    groups = saved["param_groups"]
    if len(groups) != len(fresh["param_groups"]):
        raise Damaged("optimizer", f"{len(groups)} parameter groups in the file, {len(fresh['param_groups'])} in "
                                   f"the run's optimizer")
    params = {}
    for i, (group, ours, live) in enumerate(zip(groups, fresh["param_groups"], optimizer.param_groups)):
        entry = f"optimizer.param_groups[{i}]"
        if not isinstance(group, dict) or not isinstance(group.get("params"), list) \
                or not all(_int(p) for p in group["params"]) or "lr" not in group:
            raise Damaged(entry, f"is {describe(group)}, expected a dict with a list of parameter ids and an lr")
        if len(group["params"]) != len(ours["params"]):
            raise Damaged(entry, f"holds {len(group['params'])} parameters in the file, {len(ours['params'])} "
                                 f"in the run's model")
        for pid, param in zip(group["params"], live["params"]):
            if pid in params:
                raise Damaged(entry, f"parameter id {pid} appears twice")
            params[pid] = param
        for key, value in ours.items():
            if key == "params" or key not in group and (value is None or isinstance(value, bool)):
                continue  # a flag absent from a file of an older torch: torch fills it in
            if key not in group:
                raise Damaged(entry, f"has no {key!r}")
            if scheduled and key == "lr":
                if not (_number(group[key]) and 0 <= group[key] < math.inf):
                    raise Damaged(f"{entry}.lr", f"is {describe(group[key])}, expected a learning rate")
            elif not _same(group[key], value):
                raise Damaged(f"{entry}.{key}", f"is {group[key]!r} in the file, {value!r} for the run's spec")
    for pid, pstate in saved["state"].items():
        entry = f"optimizer.state[{pid!r}]"
        if pid not in params:
            raise Damaged(entry, "belongs to no parameter of the parameter groups")
        if not isinstance(pstate, dict):
            raise Damaged(entry, f"is {describe(pstate)}, expected a dict")
        _check_param_state(pstate, params[pid], entry, optimizer)


def _check_param_state(pstate: dict, param, entry: str, optimizer) -> None:
    import torch

    if pstate and isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW)):
        needed = {"step", "exp_avg", "exp_avg_sq"}
        if optimizer.defaults.get("amsgrad"):
            needed.add("max_exp_avg_sq")
        lacking = sorted(needed - set(pstate))
        if lacking:
            raise Damaged(entry, f"has no {', '.join(lacking)}")
    for name, value in pstate.items():
        if name == "step":
            step = float(value) if _number(value) or (_tensor(value) and value.numel() == 1) else None
            if step is None or not 0 <= step < math.inf:
                raise Damaged(f"{entry}.step", f"is {describe(value)}, expected a step count")
        elif name in PARAM_SHAPED and not (name == "momentum_buffer" and value is None):  # SGD starts one
            if not _tensor(value) or value.shape != param.shape:
                raise Damaged(f"{entry}.{name}", f"is {describe(value)}, expected a tensor of the parameter's shape "
                                                 f"{tuple(param.shape)}")


def _same(a, b) -> bool:
    """Equal values, a tuple equal to the list of its items (a settings' value in a file)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if _tensor(a) or _tensor(b):
        import torch

        return _tensor(a) and _tensor(b) and a.shape == b.shape and bool(torch.equal(a.cpu(), b.cpu()))
    if _number(a) and _number(b):
        return a == b
    return type(a) is type(b) and a == b


def _conform(saved, fresh, entry: str, constants: bool) -> None:
    """``saved`` of the same make as ``fresh``: a dict of the same keys, a list of the same length,
    an int for an int, a finite number for a float, a bool for a bool; with ``constants`` every
    value equal to ``fresh``'s."""
    if constants:
        if not _same(saved, fresh):
            raise Damaged(entry, f"is {saved!r} in the file, {fresh!r} for the run's spec")
    elif isinstance(fresh, dict):
        if not isinstance(saved, dict):
            raise Damaged(entry, f"is {describe(saved)}, expected a dict")
        for key, value in fresh.items():
            if key not in saved:
                raise Damaged(entry, f"has no {key!r}")
            _conform(saved[key], value, f"{entry}.{key}", False)
    elif isinstance(fresh, (list, tuple)):
        if not isinstance(saved, (list, tuple)) or len(saved) != len(fresh):
            raise Damaged(entry, f"is {describe(saved)}, expected a list of {len(fresh)}")
        for i, (a, b) in enumerate(zip(saved, fresh)):
            _conform(a, b, f"{entry}[{i}]", False)
    elif isinstance(fresh, bool):
        if not isinstance(saved, bool):
            raise Damaged(entry, f"is {describe(saved)}, expected true or false")
    elif _int(fresh):
        if not _int(saved) or saved < min(0, fresh):
            raise Damaged(entry, f"is {describe(saved)}, expected an int of at least {min(0, fresh)}")
    elif isinstance(fresh, float):
        if not _number(saved) or not math.isfinite(saved) or (fresh >= 0 > saved):
            raise Damaged(entry, f"is {describe(saved)}, expected a finite number")
    elif _tensor(fresh):
        if not _tensor(saved) or saved.shape != fresh.shape:
            raise Damaged(entry, f"is {describe(saved)}, expected a tensor of shape {tuple(fresh.shape)}")
    elif fresh is not None and type(saved) is not type(fresh):
        raise Damaged(entry, f"is {describe(saved)}, expected {describe(fresh)}")


def _check_scheduler(saved, scheduler) -> None:
    fresh = scheduler.state_dict()
    if not isinstance(saved, dict):
        raise Damaged("scheduler", f"is {describe(saved)}, expected the state of the spec's scheduler")
    dynamic = SCHEDULER_DYNAMIC | set(getattr(scheduler, "checkpoint_dynamic_keys", ()))
    for key, value in fresh.items():
        if key not in saved:
            raise Damaged("scheduler", f"has no {key!r}")
        _conform(saved[key], value, f"scheduler.{key}", constants=key not in dynamic)


def _check_average(saved, average) -> None:
    if not isinstance(saved, dict) or "shadow" not in saved or "updates" not in saved:
        raise Damaged("moving_average", f"is {describe(saved)}, expected the averaged weights")
    if not _int(saved["updates"]) or saved["updates"] < 0:
        raise Damaged("moving_average.updates", f"is {describe(saved['updates'])}, expected a step count")
    shadow = saved["shadow"]
    if not isinstance(shadow, dict):
        raise Damaged("moving_average.shadow", f"is {describe(shadow)}, expected a dict of tensors")
    for name in average.names:
        value, ours = shadow.get(name), average.shadow[name]
        if not _tensor(value) or value.shape != ours.shape:
            raise Damaged(f"moving_average.shadow.{name}", f"is {describe(value)}, expected a tensor of shape "
                                                           f"{tuple(ours.shape)}")


def _check_rng(rng, entry: str) -> None:
    """Each RNG state set on a throwaway generator: what it refuses, a resume would."""
    import random

    import numpy as np
    import torch

    if not isinstance(rng, dict) or not all(k in rng for k in ("torch", "python", "numpy")):
        raise Damaged(entry, f"is {describe(rng)}, expected the torch, python and numpy RNG states")
    failures = (RuntimeError, TypeError, ValueError, OverflowError, IndexError, AttributeError)
    try:
        if not _tensor(rng["torch"]):
            raise TypeError(f"is {describe(rng['torch'])}")
        torch.Generator().set_state(rng["torch"].cpu())
    except failures as e:
        raise Damaged(f"{entry}.torch", f"not a torch RNG state ({str(e).splitlines()[0][:200]})") from None
    python = rng["python"]
    try:
        version, internal, gauss = python
        if not _int(version) or not isinstance(internal, (list, tuple)) or not all(_int(x) for x in internal) \
                or not (gauss is None or isinstance(gauss, float)):
            raise TypeError(f"is {describe(python)}")
        random.Random().setstate((version, tuple(internal), gauss))
    except failures as e:
        raise Damaged(f"{entry}.python", f"not a Python RNG state ({str(e).splitlines()[0][:200]})") from None
    try:
        kind, keys, pos, has_gauss, cached = rng["numpy"]
        if not isinstance(kind, str) or not isinstance(cached, float) \
                or not (_tensor(keys) or isinstance(keys, (np.ndarray, list))):
            raise TypeError(f"is {describe(rng['numpy'])}")
        if not _int(pos) or not 0 <= pos <= 624 or has_gauss not in (0, 1) or isinstance(has_gauss, bool):
            # NumPy does not check the position: outside 0..624 it reads past its key array
            raise ValueError(f"position {pos!r}, has_gauss {has_gauss!r}: expected 0..624 and 0 or 1")
        np.random.RandomState().set_state(numpy_state(rng["numpy"]))
    except failures as e:
        raise Damaged(f"{entry}.numpy", f"not a NumPy RNG state ({str(e).splitlines()[0][:200]})") from None
    cuda = rng.get("cuda")
    if cuda is not None and (not isinstance(cuda, (list, tuple)) or not all(
            _tensor(s) and s.dtype == torch.uint8 and s.dim() == 1 for s in cuda)):
        raise Damaged(f"{entry}.cuda", f"is {describe(cuda)}, expected a list of CUDA RNG states")
