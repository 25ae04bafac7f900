"""The position-wise feed-forward block of a Transformer layer."""
from __future__ import annotations

from typing import Literal

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


class FeedForward(nn.Module):
    """``Linear -> activation -> dropout -> Linear``: ``[..., d] -> [..., d]``. ``relu`` (Vaswani
    et al.) or ``gelu`` (BERT, whose feed-forward has no inner dropout: ``dropout=0``)."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0, activation: Literal["relu", "gelu"] = "relu"):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), ACTIVATIONS[activation](), nn.Dropout(dropout),
                                 nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
