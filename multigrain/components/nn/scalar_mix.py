"""A learned weighted sum of a backbone's layers (Peters et al. 2018, ELMo §3.2; AllenNLP's ``ScalarMix``)."""
from __future__ import annotations

import torch
from torch import nn


class ScalarMix(nn.Module):
    """``gamma * sum_j softmax(s)_j * h_j`` over ``L`` layers ``h_j [B, n, d]``.

    ``s`` starts at zero (every layer weighted ``1/L``) and ``gamma`` at one, so that before training
    the mix is the layers' mean."""

    def __init__(self, layers: int):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, layers: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> torch.Tensor:
        if len(layers) != self.weights.numel():
            raise ValueError(f"{len(layers)} layers given to a mix of {self.weights.numel()}")
        stacked = torch.stack(tuple(layers), dim=0)  # [L, B, n, d]
        w = torch.softmax(self.weights, dim=0).to(stacked.dtype)
        return self.gamma * torch.einsum("l,lbnd->bnd", w, stacked)
