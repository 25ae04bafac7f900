"""A post-LayerNorm Transformer layer whose attention scores take an additive per-head bias
(Lattice-BERT's lattice position attention, paper eq. 2; BERT when the bias is only the padding
mask): ``score_ij = q_i.k_j * scale + bias_hij``, ``bias [B, h, T, T]`` float, ``-inf`` at keys
that must not be attended. The bias is computed once by the caller and shared by every layer."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.transformer_layer import PostNormTransformerLayer


class BiasedAttentionLayer(PostNormTransformerLayer):
    """BERT's layer (GELU, no FFN dropout, LayerNorm eps 1e-12) with ``attend(x, bias, scale)``:
    ``x [B, T, d]``, ``bias [B, h, T, T]`` -> ``[B, T, d]``. ``scale`` defaults to ``1/sqrt(d_k)``
    (Lattice-BERT uses ``1/sqrt(2 d_k)``: its content and position terms are summed)."""

    def __init__(self, dim: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 scale: Optional[float] = None):
        super().__init__(MultiHeadAttention(dim, num_heads, dropout=attention_dropout), ffn_dim, dropout,
                         activation="gelu", ffn_dropout=0.0, norm_eps=1e-12)
        self.scale = scale

    def attend(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        att = self.attention
        q, k, v = att.heads(att.q(x)), att.heads(att.k(x)), att.heads(att.v(x))  # [B, h, T, dk]
        dropout = att.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=dropout,
                                             scale=self.scale)
        return att.merge(out)
