"""The Transformer encoder layer (Vaswani et al. 2017, §3.1; BERT's with GELU), post- or pre-norm.

Post-norm (the default, Vaswani et al.)::

    x = LayerNorm(x + Dropout(SA(x)));   x = LayerNorm(x + Dropout(FFN(x)))

Pre-norm (``pre_norm=True``; Wang et al. 2019, Xiong et al. 2020 "On Layer Normalization in the
Transformer Architecture")::

    x = x + Dropout(SA(LayerNorm(x)));   x = x + Dropout(FFN(LayerNorm(x)))

The residual stream is never normalised, so the gradient reaches the lower layers unscaled and
training needs little or no warm-up; a pre-norm *stack* ends with one more LayerNorm
(:class:`FinalNorm`). Both forms have the same parameters (``norm1.norm``, ``norm2.norm``), so a
state dict names the same tensors either way.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.nn.add_norm import AddNorm
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.feed_forward import FeedForward


class PostNormTransformerLayer(nn.Module):
    """``x = LayerNorm(x + attend(x, ...))``, then ``LayerNorm(x + FFN(x))``: ``[B, T, d] -> [B, T, d]``;
    with ``pre_norm`` ``x + attend(LayerNorm(x), ...)``, then ``x + FFN(LayerNorm(x))``.

    ``attend`` calls ``attention`` (of any heads, head size or relation tables) with the
    layer's extra arguments (keys, masks, relations); a layer that lays out its keys itself
    (BiG) overrides it. ``activation`` and ``ffn_dropout`` (default ``dropout``) shape the FFN;
    ``norm_eps`` the LayerNorms (BERT: GELU, no FFN dropout, 1e-12).
    """

    def __init__(self, attention: MultiHeadAttention, ffn_dim: int, dropout: float,
                 activation: Literal["relu", "gelu"] = "relu", ffn_dropout: Optional[float] = None,
                 norm_eps: float = 1e-5, pre_norm: bool = False):
        super().__init__()
        dim = attention.q.in_features
        self.attention = attention
        self.norm1 = AddNorm(dim, dropout, norm_eps)
        self.ffn = FeedForward(dim, ffn_dim, dropout if ffn_dropout is None else ffn_dropout, activation)
        self.norm2 = AddNorm(dim, dropout, norm_eps)
        self.pre_norm = pre_norm

    def attend(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        return self.attention(x, *args, **kwargs)

    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        if self.pre_norm:
            x = self.norm1.residual(x, self.attend(self.norm1.norm(x), *args, **kwargs))
            return self.norm2.residual(x, self.ffn(self.norm2.norm(x)))
        x = self.norm1(x, self.attend(x, *args, **kwargs))
        return self.norm2(x, self.ffn(x))


TransformerLayer = PostNormTransformerLayer


def final_norm(dim: int, pre_norm: bool, eps: float = 1e-5) -> Optional[nn.LayerNorm]:
    """The LayerNorm over a pre-norm stack's output (its residual stream is never normalised
    inside the stack); ``None`` for post-norm, whose layers end normalised (and whose state dicts
    then have no extra tensor)."""
    return nn.LayerNorm(dim, eps=eps) if pre_norm else None
