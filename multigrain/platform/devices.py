"""Where a training or an evaluation runs: the device a ``trainer.cuda_device`` names
(``pick_device``), how a result names it (``describe_device``), moving a batch there (``move_to``),
and why a ``trainer`` section cannot train on it (``refusal``: mixed precision, ``torch.compile``),
checked before a run directory is made.

``move_to`` copies tensors with ``non_blocking=True`` (a pinned batch is copied to a GPU while the
host builds the next one), also through a batch type's own ``to`` when it accepts the argument
(``LatticeBatch.to`` does).
"""
from __future__ import annotations

from typing import Optional

import torch

from multigrain.platform import compiling


def pick_device(cuda_device: Optional[int]) -> torch.device:
    if cuda_device is not None and cuda_device < 0:
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device(f"cuda:{cuda_device or 0}")
    return torch.device("cpu")


def describe_device(device: torch.device) -> str:
    """Where a run trained, for its results: ``GPU <name>`` or ``CPU only (<machine>, <n> threads)``."""
    import platform

    if device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}"
    return f"CPU only ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def move_to(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: move_to(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to(v, device) for v in batch)
    if hasattr(batch, "to") and callable(batch.to):
        return batch.to(device, non_blocking=True) if _takes_non_blocking(type(batch)) else batch.to(device)
    return batch


_NON_BLOCKING: dict[type, bool] = {}


def _takes_non_blocking(kind: type) -> bool:
    """Whether ``kind.to`` accepts ``non_blocking`` (``LatticeBatch.to`` does)."""
    if kind not in _NON_BLOCKING:
        import inspect

        try:
            _NON_BLOCKING[kind] = "non_blocking" in inspect.signature(kind.to).parameters
        except (TypeError, ValueError):
            _NON_BLOCKING[kind] = False
    return _NON_BLOCKING[kind]


def refusal(config, device: torch.device) -> Optional[str]:
    """Why the ``trainer`` section (``config``, a ``training.TrainerConfig``) cannot train on
    ``device`` (mixed precision, compile), or None; checked before the run directory is made."""
    from multigrain.platform.precision import refusal as precision_refusal

    return precision_refusal(config.mixed_precision, device) or (compiling.refusal(device) if config.compile else None)
