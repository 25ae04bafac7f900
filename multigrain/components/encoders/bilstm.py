"""Bidirectional LSTM over characters (the classic BiLSTM-CRF baseline)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from multigrain.platform.kinds import Encoder


@Encoder.register("bilstm")
class BiLstmEncoder(Encoder):
    """[B, n, d_in] -> [B, n, 2 * hidden_size]; padded positions are zeros."""

    def __init__(self, input_dim: int, hidden_size: int = 200, num_layers: int = 1, dropout: float = 0.0):
        super().__init__()
        self.input_dim = input_dim
        self.lstm = nn.LSTM(input_dim, hidden_size, num_layers=num_layers, batch_first=True, bidirectional=True,
                            dropout=dropout if num_layers > 1 else 0.0)
        self.output_dim = 2 * hidden_size

    def get_input_dim(self) -> int:
        return self.input_dim

    def get_output_dim(self) -> int:
        return self.output_dim

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: dict | None = None) -> torch.Tensor:
        lengths = mask.sum(-1).clamp(min=1).cpu()
        packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=inputs.shape[1])
        return out
