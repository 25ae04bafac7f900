"""A run's checkpoints: ``best.pt`` (the best weights, a state dict) and ``last.pt`` (everything a
``training.Trainer`` needs to continue bit-identically: model, optimizer, scheduler and averaged
weights, the epoch, the early-stopping state, the history, every RNG's state). ``last.pt`` is written
at the end of every epoch and, in a one-process training, every ``MULTIGRAIN_CHECKPOINT_SECONDS``
(default 600) inside one: then it also holds the steps done in the epoch and their loss sum
(``step_in_epoch``, ``epoch_loss``), and a resume continues from the next step
(``checkpoint_interval``).

Both are read through ``weights.load_weights`` (``weights_only=True``, regular files only) and
checked before anything is used: a file that loads but does not fit the run - a missing entry, a
value of another type, an epoch outside ``0..trainer.num_epochs``, a tensor of another shape than
the model's, an optimizer state of other parameter groups, RNG states that are not RNG states - is
one ConfigurationError naming the file and the first thing wrong, raised before the trainer or
model is changed (``restore``; the checks: ``checkpoint_checks``). Writing goes through
``weights.save_weights`` (``FILE.tmp``, then a rename; a full disk leaves the previous file and no
``.tmp``).

torch is imported inside the functions (``multigrain --help`` imports ``archive``, which imports
this module).
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from multigrain.platform.checkpoint_checks import check_training_state, numpy_state
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.weights import load_into, load_weights, save_weights, tensor_dict

#: seconds between two checkpoints inside an epoch: a number (0: after every step), or ``off``
INTERVAL_ENV = "MULTIGRAIN_CHECKPOINT_SECONDS"
DEFAULT_INTERVAL = 600.0


def checkpoint_interval() -> float:
    """Seconds of training between two ``last.pt`` written inside an epoch (``INTERVAL_ENV``;
    ``off``: at the ends of epochs only, ``math.inf``). Anything else is a ConfigurationError naming
    the variable and its value."""
    setting = os.environ.get(INTERVAL_ENV, "").strip()
    if not setting:
        return DEFAULT_INTERVAL
    if setting.lower() == "off":
        return math.inf
    try:
        value = float(setting)
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:
        raise ConfigurationError(f"{INTERVAL_ENV}={setting!r}: expected a number of seconds >= 0 (0: after "
                                 f"every step) or 'off' (only at the ends of epochs)")
    return value


def load_checkpoint(path: Path, device) -> dict:
    """The dict in a checkpoint file, unchecked (``weights.load_weights``)."""
    return load_weights(path, "checkpoint", device)


def atomic_save(obj, path: Path) -> None:
    save_weights(obj, path)


# ------------------------------------------------------------------------------------- RNG states
def rng_state() -> dict:
    """Every RNG's state as tensors and plain Python values (a checkpoint loads with
    ``weights_only=True``: nothing in it can name code to run)."""
    import random

    import numpy as np
    import torch

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)]}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    import random

    import numpy as np
    import torch

    torch.set_rng_state(state["torch"].cpu())
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np.random.set_state(numpy_state(state["numpy"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


# ------------------------------------------------------------------------------------- best.pt
def load_model_weights(model, path: Path, device) -> None:
    """A state dict file (``best.pt``) into ``model``; one ConfigurationError when it does not fit."""
    load_into(model, tensor_dict(load_checkpoint(path, device), path), path)


# ------------------------------------------------------------------------------------- last.pt
def restore(trainer, path: Path) -> None:
    """Continue ``trainer`` (a ``training.Trainer``) from the checkpoint ``path``: every entry is
    checked first (``check_training_state``), then applied; a file that does not fit leaves the
    trainer's counters, optimizer and RNGs as they were."""
    state = load_checkpoint(path, trainer.device)
    check_training_state(state, path, trainer)
    load_into(trainer.model, state["model"], path, "model")
    try:
        trainer.optimizer.load_state_dict(state["optimizer"])
        if trainer.scheduler:
            trainer.scheduler.load_state_dict(state["scheduler"])
        if trainer.average:
            trainer.average.load_state_dict(state["moving_average"])
        trainer.precision.load_state_dict(state.get("grad_scaler"))
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigurationError(f"{path}: the training state does not fit the run ({first[:300]})") from None
    trainer.epoch, trainer.best, trainer.best_epoch = state["epoch"], state["best"], state["best_epoch"]
    trainer.bad_epochs, trainer.history = state["bad_epochs"], state["history"]
    trainer.seconds_before = float(state.get("seconds") or 0.0)
    trainer.resume_step = state.get("step_in_epoch") or 0
    trainer.resume_loss = float(state.get("epoch_loss") or 0.0)
    per_replica = state.get("replica_rng")
    replica = trainer.replica
    if replica and per_replica and len(per_replica) == replica.world_size:
        set_rng_state(per_replica[replica.rank])
    else:
        set_rng_state(state["rng"])
