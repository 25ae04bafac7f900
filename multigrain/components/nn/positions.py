"""Absolute position vectors: Vaswani et al.'s sinusoids or a learned table."""
from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn


def sinusoidal_positions(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """Vaswani et al.'s table at integer ``positions`` ``[...]`` -> ``[..., dim]`` float:
    ``p(j, 2i) = sin(j / base^(2i/dim))``, ``p(j, 2i+1) = cos(...)``."""
    half = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
    freq = torch.exp(-math.log(base) * half / dim)  # [ceil(dim/2)]
    angle = positions.float().unsqueeze(-1) * freq  # [..., ceil(dim/2)]
    out = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)
    return out[..., :dim]


class PositionEmbedding(nn.Module):
    """Absolute position vectors ``[B, T] long -> [B, T, dim]``: ``sinusoidal`` (no
    parameters, any length), ``learned`` (a table of ``max_length`` rows) or ``none`` (zeros)."""

    def __init__(self, dim: int, kind: Literal["sinusoidal", "learned", "none"] = "sinusoidal",
                 max_length: int = 512):
        super().__init__()
        if kind not in ("sinusoidal", "learned", "none"):
            raise ValueError(f"positions must be 'sinusoidal', 'learned' or 'none', got {kind!r}")
        self.dim, self.kind, self.max_length = dim, kind, max_length
        self.table = nn.Embedding(max_length, dim) if kind == "learned" else None
        if self.table is not None:
            nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        if self.kind == "sinusoidal":
            return sinusoidal_positions(positions, self.dim)
        if self.kind == "none":
            return positions.new_zeros(positions.shape + (self.dim,), dtype=torch.float32)
        if positions.numel() and int(positions.max()) >= self.max_length:
            raise ValueError(f"position {int(positions.max())} >= max_length {self.max_length} of the learned "
                             f"position table; raise max_length or use sinusoidal positions")
        return self.table(positions)
