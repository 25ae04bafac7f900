"""Encoders applied in turn (AllenNLP's ``compose``): e.g. BiG layers over a BiLSTM, the way the
BiG paper ran its NER layers over BERT.

``encoders`` is a list of encoder specs; each is built with ``input_dim`` = the previous one's
output size and reads the previous one's output. Every encoder gets the batch (lattices
included), so a lattice encoder may follow a character one: after an encoder that returns the
characters of a lattice batch ``[B, n, d]``, the next one gets the character mask.
"""
from __future__ import annotations

import torch
from torch import nn

from multigrain.components.nn.char_input import char_view
from multigrain.platform.config import Lazy
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder


@Encoder.register("compose")
class ComposeEncoder(Encoder):
    """``[B, T, input_dim]`` -> the last encoder's output ``[B, n, d_last]``."""

    def __init__(self, input_dim: int, encoders: list[Lazy[Encoder]]):
        super().__init__()
        if not encoders:
            raise ConfigurationError("compose: encoders must name at least one encoder")
        self.input_dim = input_dim
        built, dim = [], input_dim
        for lazy in encoders:
            encoder = lazy.construct(input_dim=dim)
            built.append(encoder)
            dim = encoder.get_output_dim()
        self.encoders = nn.ModuleList(built)

    def get_input_dim(self) -> int:
        return self.input_dim

    def get_output_dim(self) -> int:
        return self.encoders[-1].get_output_dim()

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: dict | None = None) -> torch.Tensor:
        x = inputs
        for encoder in self.encoders:
            if x.shape[1] != mask.shape[1]:  # lattice tokens in, characters out
                mask = char_view(x, mask, batch)[1]
            x = encoder(x, mask, batch)
        return x
