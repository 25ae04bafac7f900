"""The Transformer decoder layer (Vaswani et al. 2017, §3.1, "Transformer base"), post- or pre-norm.

For target states ``y [B, T, d]`` and encoder states (the memory) ``m [B, S, d]``, post-norm::

    y = LayerNorm(y + Dropout(SelfAttention(y, keys y_{<=t})))          masked: no future position
    y = LayerNorm(y + Dropout(CrossAttention(y, keys m, source mask)))
    y = LayerNorm(y + Dropout(FFN(y)))

and pre-norm (``pre_norm=True``, Xiong et al. 2020; the decoder adds a final LayerNorm)::

    y = y + Dropout(SelfAttention(LN1(y), keys LN1(y)_{<=t}))
    y = y + Dropout(CrossAttention(LN2(y), keys m, source mask))
    y = y + Dropout(FFN(LN3(y)))

Keys and values are projected by the caller-visible halves of :class:`MultiHeadAttention`
(``key_values`` / ``attend``), so that incremental decoding keeps them: the cross-attention's
once per source (:meth:`memory`, ``[B, h, S, dh]``, shared by the source's beams, which attend
as that many queries), the self-attention's grown by one position per step (:meth:`step`, a
:class:`KeyValueCache` of ``[N, h, t, dh]``).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.components.nn.add_norm import AddNorm
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.feed_forward import FeedForward
from multigrain.components.nn.key_value_cache import KeyValueCache
from multigrain.components.nn.sequence import RealRows

KeyValues = tuple[torch.Tensor, torch.Tensor]


class PostNormDecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, FFN; each followed by add & norm
    (``pre_norm``: each preceded by a LayerNorm of its input, the residual left as it is)."""

    def __init__(self, dim: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float = 0.0,
                 pre_norm: bool = False):
        super().__init__()
        self.pre_norm = pre_norm
        self.self_attention = MultiHeadAttention(dim, num_heads, dropout=attention_dropout)
        self.norm1 = AddNorm(dim, dropout)
        self.cross_attention = MultiHeadAttention(dim, num_heads, dropout=attention_dropout)
        self.norm2 = AddNorm(dim, dropout)
        self.ffn = FeedForward(dim, ffn_dim, dropout)
        self.norm3 = AddNorm(dim, dropout)

    def memory(self, memory: torch.Tensor) -> KeyValues:
        """The cross-attention keys and values of ``memory [B, S, d]``: ``[B, h, S, dh]`` each."""
        return self.cross_attention.key_values(memory)

    def forward(self, y: torch.Tensor, memory: KeyValues, memory_mask: torch.Tensor,
                causal: torch.Tensor, rows: Optional[RealRows] = None) -> torch.Tensor:
        """Every position at once (teacher forcing): ``y [B, T, d]``, ``memory`` from
        :meth:`memory`; the attention masks as :meth:`MultiHeadAttention.attend` takes them,
        made once for all layers: ``memory_mask [B, 1, 1, S]``, ``causal [1, 1, T, T]``.
        Returns ``[B, T, d]``. With ``rows`` (the real target positions, right-padded) ``y`` and
        the result are ``[N, d]``: every position-wise part runs on the real rows alone (padded
        keys are never seen: the causal mask hides what follows a real position)."""
        h = self.norm1.norm(y) if self.pre_norm else y
        keys, values = self.self_attention.key_values(h, rows)
        y = self._add(self.norm1, y, self.self_attention.attend(h, keys, values, causal, rows))
        return self._cross_and_ffn(y, memory, memory_mask, rows)

    def step(self, y: torch.Tensor, cache: KeyValueCache, memory: KeyValues, memory_mask: torch.Tensor,
             beam_size: int = 1) -> torch.Tensor:
        """One new position of ``N = B * beam_size`` rows (row ``b * beam_size + k``: beam k of
        source b): ``y [N, 1, d]``; ``cache`` the self-attention keys/values of the earlier
        positions ``[N, h, t, dh]``, to which this position's are appended; ``memory`` the B
        sources' keys/values ``[B, h, S, dh]`` and ``memory_mask [B, 1, 1, S]``, not repeated per
        beam: the beams of a source are its ``beam_size`` queries in one cross-attention. Returns
        ``y [N, 1, d]``: the numbers of :meth:`forward` at t."""
        h = self.norm1.norm(y) if self.pre_norm else y
        keys, values = cache.append(*self.self_attention.key_values(h))
        y = self._add(self.norm1, y, self.self_attention.attend(h, keys, values))
        by_source = self._cross_and_ffn(y.view(-1, beam_size, y.shape[-1]), memory, memory_mask)
        return by_source.view(y.shape)

    def _add(self, norm: AddNorm, y: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return norm.residual(y, out) if self.pre_norm else norm(y, out)

    def _cross_and_ffn(self, y: torch.Tensor, memory: KeyValues, memory_mask: torch.Tensor,
                       rows: Optional[RealRows] = None) -> torch.Tensor:
        h = self.norm2.norm(y) if self.pre_norm else y
        y = self._add(self.norm2, y, self.cross_attention.attend(h, memory[0], memory[1], memory_mask, rows))
        h = self.norm3.norm(y) if self.pre_norm else y
        return self._add(self.norm3, y, self.ffn(h))
