"""The post-LayerNorm Transformer encoder layer (Vaswani et al. 2017, §3.1; BERT's with GELU)."""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.nn.add_norm import AddNorm
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.feed_forward import FeedForward


class PostNormTransformerLayer(nn.Module):
    """``x = LayerNorm(x + attend(x, ...))``, then ``LayerNorm(x + FFN(x))``: ``[B, T, d] -> [B, T, d]``.

    ``attend`` calls ``attention`` (of any heads, head size or relation tables) with the
    layer's extra arguments (keys, masks, relations); a layer that lays out its keys itself
    (BiG) overrides it. ``activation`` and ``ffn_dropout`` (default ``dropout``) shape the FFN;
    ``norm_eps`` the LayerNorms (BERT: GELU, no FFN dropout, 1e-12).
    """

    def __init__(self, attention: MultiHeadAttention, ffn_dim: int, dropout: float,
                 activation: Literal["relu", "gelu"] = "relu", ffn_dropout: Optional[float] = None,
                 norm_eps: float = 1e-5):
        super().__init__()
        dim = attention.q.in_features
        self.attention = attention
        self.norm1 = AddNorm(dim, dropout, norm_eps)
        self.ffn = FeedForward(dim, ffn_dim, dropout if ffn_dropout is None else ffn_dropout, activation)
        self.norm2 = AddNorm(dim, dropout, norm_eps)

    def attend(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return self.attention(x, *args, **kwargs)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        x = self.norm1(x, self.attend(x, *args, **kwargs))
        return self.norm2(x, self.ffn(x))
