"""PLTE's decoder (§4.3): a BiGRU over ``[char input; encoder char state]``, then a CRF.

``forward(states [B, n, d], mask [B, n], tags=None, inputs [B, n, d_e])``: the GRU reads
``[x_i^c; h_i]`` where x^c is the embedder's character output (the tagger passes it as
``inputs``), the BiGRU outputs ``[B, n, 2 * hidden_size]`` go through dropout into ``crf``
(``CrfHead``: linear emissions, constrained Viterbi, pytorch-crf likelihood).

``embedder_dim`` is the size of ``inputs`` (the embedder's output); the tagger may inject it,
else the spec sets it. ``use_char_input=False`` reads the encoder states alone.
Paper settings: GRU hidden 200 (MSRA), 80 (Weibo), 100 (others); dropout 0.5.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from multigrain.components.heads.crf import CrfHead
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Head


@Head.register("bigru_crf")
class BiGruCrfHead(Head):
    """Returns ``logits`` [B, n, K], ``predictions`` [B, n] and, with tags, ``loss`` (CrfHead's)."""

    def __init__(self, input_dim: int, labels: list[str], embedder_dim: Optional[int] = None,
                 hidden_size: int = 100, dropout: float = 0.5, use_char_input: bool = True,
                 constrained: bool = True, scheme: Optional[str] = None):
        super().__init__()
        if use_char_input and not embedder_dim:
            raise ConfigurationError("bigru_crf: set embedder_dim to the embedder's output size (the GRU reads "
                                     "[char input; encoder state]), or use_char_input: false")
        self.use_char_input = use_char_input
        gru_input = input_dim + (embedder_dim if use_char_input else 0)
        self.gru = nn.GRU(gru_input, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.crf = CrfHead(2 * hidden_size, labels, constrained=constrained, scheme=scheme)
        self.labels, self.scheme = self.crf.labels, self.crf.scheme

    def forward(self, states: torch.Tensor, mask: torch.Tensor, tags: Optional[torch.Tensor] = None,
                inputs: Optional[torch.Tensor] = None, **unused) -> dict[str, torch.Tensor]:
        if self.use_char_input:
            if inputs is None:
                raise ValueError("bigru_crf with use_char_input needs inputs (the character embeddings)")
            states = torch.cat([inputs[:, : states.shape[1]], states], dim=-1)
        x = states  # the embedder and the encoder have applied their own dropout
        lengths = mask.sum(-1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return self.crf(self.dropout(out), mask, tags=tags)
