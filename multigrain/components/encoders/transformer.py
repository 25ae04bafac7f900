"""The Transformer baseline: a post-LayerNorm Transformer encoder over characters only.

``x = proj(inputs) + P(position)``, then ``num_layers`` x (self-attention over the real
characters, add & norm, ReLU FFN, add & norm). ``positions``: ``sinusoidal`` (Vaswani et al.,
base 10000, the default: any length), ``learned`` (a table of ``max_length`` rows) or ``none``.
With a lattice in the batch the word tokens are ignored (characters are positions
``0..n-1``), so the same spec works with the ``char_bigram`` and the ``lattice`` embedder.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.sized import SizedEncoder
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.char_input import CharInput
from multigrain.components.nn.transformer_layer import PostNormTransformerLayer
from multigrain.platform.kinds import Encoder


@Encoder.register("transformer")
class TransformerEncoder(SizedEncoder):
    """Characters ``[B, n, input_dim]`` -> ``[B, n, hidden_size]`` (zeros at padding)."""

    def __init__(self, input_dim: int, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 ffn_dim: Optional[int] = None, dropout: float = 0.1, attention_dropout: float = 0.1,
                 positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal", max_length: int = 512):
        super().__init__()
        self.input_dim = input_dim
        self.hidden_size = self.output_dim = hidden_size
        self.char_input = CharInput(input_dim, hidden_size, dropout, positions, max_length)
        self.layers = nn.ModuleList(
            PostNormTransformerLayer(MultiHeadAttention(hidden_size, num_heads, dropout=attention_dropout),
                                     ffn_dim or 4 * hidden_size, dropout)
            for _ in range(num_layers))

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        x, char_mask = self.char_input(inputs, mask, batch)
        for layer in self.layers:
            x = layer(x, key_mask=char_mask)
        return x * char_mask.unsqueeze(-1)
