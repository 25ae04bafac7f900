"""The post-LayerNorm Transformer decoder layer (Vaswani et al. 2017, §3.1, "Transformer base").

For target states ``y [B, T, d]`` and encoder states (the memory) ``m [B, S, d]``::

    y = LayerNorm(y + Dropout(SelfAttention(y, keys y_{<=t})))          masked: no future position
    y = LayerNorm(y + Dropout(CrossAttention(y, keys m, source mask)))
    y = LayerNorm(y + Dropout(FFN(y)))

Keys and values are projected by the caller-visible halves of :class:`MultiHeadAttention`
(``key_values`` / ``attend``), so that incremental decoding keeps them: the cross-attention's
once per source (:meth:`memory`), the self-attention's grown by one position per step
(:meth:`step`), each ``[N, h, t, dh]``.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.components.nn.add_norm import AddNorm
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.feed_forward import FeedForward

KeyValues = tuple[torch.Tensor, torch.Tensor]


class PostNormDecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the memory, FFN; each followed by add & norm."""

    def __init__(self, dim: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float = 0.0):
        super().__init__()
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
                allowed: Optional[torch.Tensor]) -> torch.Tensor:
        """Every position at once (teacher forcing): ``y [B, T, d]``, ``memory`` from
        :meth:`memory`, ``memory_mask [B, S]``, ``allowed [B or 1, T, T]`` the causal mask.
        Returns ``[B, T, d]``."""
        keys, values = self.self_attention.key_values(y)
        y = self.norm1(y, self.self_attention.attend(y, keys, values, allowed=allowed))
        return self._cross_and_ffn(y, memory, memory_mask)

    def step(self, y: torch.Tensor, cache: Optional[KeyValues], memory: KeyValues,
             memory_mask: torch.Tensor) -> tuple[torch.Tensor, KeyValues]:
        """One new position: ``y [N, 1, d]``; ``cache`` the self-attention keys/values of the
        earlier positions ``[N, h, t, dh]`` (None at t = 0). Returns ``(y [N, 1, d], cache with
        this position appended [N, h, t+1, dh])``: the same numbers as :meth:`forward` at t."""
        keys, values = self.self_attention.key_values(y)
        if cache is not None:
            keys, values = torch.cat([cache[0], keys], 2), torch.cat([cache[1], values], 2)
        y = self.norm1(y, self.self_attention.attend(y, keys, values))
        return self._cross_and_ffn(y, memory, memory_mask), (keys, values)

    def _cross_and_ffn(self, y: torch.Tensor, memory: KeyValues, memory_mask: torch.Tensor) -> torch.Tensor:
        y = self.norm2(y, self.cross_attention.attend(y, memory[0], memory[1], key_mask=memory_mask))
        return self.norm3(y, self.ffn(y))
