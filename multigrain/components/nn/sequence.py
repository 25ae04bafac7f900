"""Operations along the sequence dimension (dim 1) of ``[B, T, ...]`` tensors."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def shift(x: torch.Tensor, by: int) -> torch.Tensor:
    """``out[:, i] = x[:, i - by]`` along dim 1, zeros where that is out of range."""
    if by > 0:
        return F.pad(x[:, :-by], (0, 0) * (x.dim() - 2) + (by, 0))
    return F.pad(x[:, -by:], (0, 0) * (x.dim() - 2) + (0, -by))


def masked_mean(x: torch.Tensor, mask: torch.Tensor, keepdim: bool = True) -> torch.Tensor:
    """Mean of ``x [B, T, d]`` over the True positions of ``mask [B, T]`` -> ``[B, 1, d]``."""
    m = mask.unsqueeze(-1).to(x.dtype)
    out = (x * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp(min=1)
    return out if keepdim else out.squeeze(1)


@dataclass(frozen=True)
class RealRows:
    """The N non-padding positions of a ``[B, T]`` batch, as flat indices ``positions [N]`` into
    ``B * T`` (made while collating, so reading them needs no device sync). Position-wise layers
    (projections, FFN, LayerNorm, dropout) run on ``[N, d]``; attention, which needs the
    ``[B, T]`` layout, takes :meth:`scatter`'s ``[B, T, d]`` (zeros at padding) and hands back
    :meth:`gather`'s ``[N, d]``."""

    positions: torch.Tensor
    batch_size: int
    length: int

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, ...] -> [N, ...]``."""
        return x.flatten(0, 1).index_select(0, self.positions)

    def scatter(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, ...] -> [B, T, ...]``, zeros at the padding positions."""
        full = x.new_zeros((self.batch_size * self.length,) + x.shape[1:])
        return full.index_copy(0, self.positions, x).unflatten(0, (self.batch_size, self.length))
