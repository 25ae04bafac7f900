"""Star-Transformer (Guo et al., NAACL 2019), the baseline of the BiG-Transformer paper.

Characters are satellites, plus one relay node. With ``e_i = proj(x_i) + P(i)``,
``h^0 = e`` and ``s^0 = mean(e)``, each layer t updates (paper, Algorithm 1)::

    C_i   = [h_{i-1}; h_i; h_{i+1}; e_i; s]        (t-1 states; missing neighbours masked)
    h_i   = LayerNorm(ReLU(MultiAtt(h_i, C_i)))
    s     = LayerNorm(ReLU(MultiAtt(s, [s; H])))     (H = the updated satellites)

Batched: a satellite's five keys are its own ``[B, n, 4, d]`` gathered columns (neighbours
by shifting the projected states) plus the shared relay; cost O(n). Layers do not share
parameters. Output: the satellites ``[B, n, hidden_size]`` (zeros at padding); the relay
update after the last layer reaches no output and is skipped.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
import torch.nn.functional as F
from torch import nn

from multigrain.components.encoders.sized import SizedEncoder
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.char_input import CharInput
from multigrain.components.nn.sequence import masked_mean, shift
from multigrain.platform.kinds import Encoder


@Encoder.register("star_transformer")
class StarTransformerEncoder(SizedEncoder):
    """Characters ``[B, n, input_dim]`` -> satellites ``[B, n, hidden_size]``."""

    def __init__(self, input_dim: int, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 dropout: float = 0.1, attention_dropout: float = 0.1,
                 positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal", max_length: int = 512):
        super().__init__()
        self.input_dim = input_dim
        self.hidden_size = self.output_dim = hidden_size
        self.char_input = CharInput(input_dim, hidden_size, dropout, positions, max_length)
        self.satellite = nn.ModuleList(MultiHeadAttention(hidden_size, num_heads, dropout=attention_dropout)
                                       for _ in range(num_layers))
        # the relay after the last layer would reach no output: num_layers - 1 relay updates
        self.relay = nn.ModuleList(MultiHeadAttention(hidden_size, num_heads, dropout=attention_dropout)
                                   for _ in range(num_layers - 1))
        self.satellite_norm = nn.ModuleList(nn.LayerNorm(hidden_size) for _ in range(num_layers))
        self.relay_norm = nn.ModuleList(nn.LayerNorm(hidden_size) for _ in range(num_layers - 1))

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        e, char_mask = self.char_input(inputs, mask, batch)
        B, n, _ = e.shape
        h, s = e, masked_mean(e, char_mask)  # [B, n, d], [B, 1, d]
        # the satellite's own keys: left neighbour, itself, right neighbour, its embedding
        own_allowed = torch.stack([shift(char_mask, 1), char_mask, shift(char_mask, -1), char_mask], dim=-1)
        relay_mask = torch.cat([char_mask.new_ones(B, 1), char_mask], dim=1)
        always = char_mask.new_ones(B, n, 1)
        for t, (sat, sat_norm) in enumerate(zip(self.satellite, self.satellite_norm)):
            kh, vh, ke, ve = sat.k(h), sat.v(h), sat.k(e), sat.v(e)
            own_k = torch.stack([shift(kh, 1), kh, shift(kh, -1), ke], dim=2)  # [B, n, 4, h*dh]
            own_v = torch.stack([shift(vh, 1), vh, shift(vh, -1), ve], dim=2)
            h = sat.mixed(h, sat.k(s), sat.v(s), always, own_k, own_v, own_allowed)
            h = sat_norm(F.relu(h)) * char_mask.unsqueeze(-1)
            if t < len(self.relay):
                s = self.relay_norm[t](F.relu(self.relay[t](s, torch.cat([s, h], dim=1), key_mask=relay_mask)))
        return h
