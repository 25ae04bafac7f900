"""The residual connection and LayerNorm around a Transformer sub-layer (post- or pre-norm)."""
from __future__ import annotations

import torch
from torch import nn


class AddNorm(nn.Module):
    """Post-LayerNorm residual: ``LayerNorm(x + dropout(y))``; ``eps`` 1e-12 is BERT's.

    A pre-norm layer uses the same module's two halves: ``norm(x)`` as the sub-layer's input and
    :meth:`residual` ``x + dropout(y)`` after it."""

    def __init__(self, dim: int, dropout: float = 0.0, eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.dropout(y))

    def residual(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``x + dropout(y)``: the pre-norm residual (no LayerNorm on the stream)."""
        return x + self.dropout(y)
