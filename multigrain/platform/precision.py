"""``trainer.mixed_precision``: automatic mixed precision of the training steps on CUDA.

- ``null`` (the default): every step in float32.
- ``"bf16"``: the forward pass and loss under ``torch.autocast("cuda", dtype=torch.bfloat16)``;
  bfloat16 has float32's exponent range, so gradients need no scaling.
- ``"fp16"``: autocast to float16 plus a ``torch.amp.GradScaler`` (the loss is multiplied by a
  scale before ``backward``, gradients are unscaled before clipping, a step whose gradients
  overflowed is skipped and the scale halved). The scaler's state is saved in ``last.pt``, so a
  resumed run continues with the same scale.
- ``"auto"``: ``"bf16"`` on a CUDA GPU that supports it, float32 anywhere else (a CPU, an older
  GPU); never refused. The setting for specs meant for a GPU that should still run on a CPU.

Weights, optimizer state and validation stay in float32. On a CPU a non-null value is refused
(``refusal``): the run would train in float32 under a spec that says otherwise, and its result
would be reused as that spec's.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Optional

import torch

MODES = ("bf16", "fp16", "auto")


def resolve(mode: Optional[str], device: torch.device) -> Optional[str]:
    """The autocast ``mode`` means on ``device``: ``"auto"`` becomes ``"bf16"`` or None."""
    if mode != "auto":
        return mode
    return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else None


def refusal(mode: Optional[str], device: torch.device) -> Optional[str]:
    """Why ``mode`` cannot train on ``device`` (a message for the spec error), or None."""
    if mode is None or mode == "auto":
        return None
    if device.type != "cuda":
        return (f"trainer.mixed_precision: {mode!r} is autocast on a CUDA GPU, and this run trains on the "
                f"{device.type.upper()}; set it to null for a float32 run (-o trainer.mixed_precision=null)")
    if mode == "bf16" and not torch.cuda.is_bf16_supported():
        return (f"trainer.mixed_precision: 'bf16' is not supported by {torch.cuda.get_device_name(device)}; "
                f"use 'fp16' or null")
    return None


class Precision:
    """The autocast context, backward, unscale and step of one training under ``mode``."""

    def __init__(self, mode: Optional[str], device: torch.device):
        from multigrain.platform.errors import ConfigurationError

        why_not = refusal(mode, device)
        if why_not:
            raise ConfigurationError(why_not)
        mode = resolve(mode, device)
        self.mode = mode
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode)
        self.scaler = torch.amp.GradScaler("cuda") if mode == "fp16" else None

    def autocast(self):
        return torch.autocast("cuda", dtype=self.dtype) if self.dtype is not None else nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer) -> None:
        """Before gradient clipping: the gradients in their true units."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer) -> None:
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()

    def state_dict(self) -> Optional[dict]:
        return self.scaler.state_dict() if self.scaler is not None else None

    def load_state_dict(self, state: Optional[dict]) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
