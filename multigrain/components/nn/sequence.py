"""Operations along the sequence dimension (dim 1) of ``[B, T, ...]`` tensors."""
from __future__ import annotations

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
