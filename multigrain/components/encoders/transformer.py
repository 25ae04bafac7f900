"""The Transformer baseline: a Transformer encoder over characters only.

``x = proj(inputs) + P(position)``, then ``num_layers`` x (self-attention over the real
characters, add & norm, ReLU FFN, add & norm). ``pre_norm``: each sub-layer reads
``LayerNorm(x)`` and adds to ``x`` unnormalised, and the stack ends with a LayerNorm
(``components/nn/transformer_layer.py``); off by default. ``positions``: ``sinusoidal`` (Vaswani et al.,
base 10000, the default: any length), ``learned`` (a table of ``max_length`` rows) or ``none``.
``scale_embeddings``: ``x = sqrt(hidden_size) * proj(inputs) + P(position)``, as Vaswani et al. scale
their embeddings (``components/nn/char_input.py`` says why); off by default.
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
from multigrain.components.nn.transformer_layer import PostNormTransformerLayer, final_norm
from multigrain.platform.kinds import Encoder


@Encoder.register("transformer")
class TransformerEncoder(SizedEncoder):
    """Characters ``[B, n, input_dim]`` -> ``[B, n, hidden_size]`` (zeros at padding)."""

    def __init__(self, input_dim: int, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 ffn_dim: Optional[int] = None, dropout: float = 0.1, attention_dropout: float = 0.1,
                 positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal", max_length: int = 512,
                 pre_norm: bool = False, scale_embeddings: bool = False):
        super().__init__()
        self.input_dim = input_dim
        self.hidden_size = self.output_dim = hidden_size
        self.char_input = CharInput(input_dim, hidden_size, dropout, positions, max_length, scale_embeddings)
        self.layers = nn.ModuleList(
            PostNormTransformerLayer(MultiHeadAttention(hidden_size, num_heads, dropout=attention_dropout),
                                     ffn_dim or 4 * hidden_size, dropout, pre_norm=pre_norm)
            for _ in range(num_layers))
        self.pre_norm = pre_norm
        if pre_norm:
            self.final_norm = final_norm(hidden_size, pre_norm)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        x, char_mask = self.char_input(inputs, mask, batch)
        for layer in self.layers:
            x = layer(x, key_mask=char_mask)
        if self.pre_norm:
            x = self.final_norm(x)
        return x * char_mask.unsqueeze(-1)
