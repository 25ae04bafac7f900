"""The input of the Transformer-style encoders: projected token vectors plus the positions of
their characters."""
from __future__ import annotations

import math
from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.nn.positions import PositionEmbedding


def char_view(inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """The character part of an encoder's input: ``(x [B, n, d], char_mask [B, n])``.

    With a lattice in the batch the characters are its first ``max_chars`` positions (whether
    the embedder produced lattice tokens [B, T, d] or characters only [B, n, d]); without one
    the input is characters and ``mask`` their mask.
    """
    lattice = (batch or {}).get("lattice")
    if lattice is None:
        return inputs, mask
    n = lattice.max_chars
    return inputs[:, :n], lattice.char_mask


class CharInput(nn.Module):
    """``e = dropout(s * proj(x) + P(position))``, ``proj`` the identity when ``input_dim`` is
    ``hidden_size``, ``P`` a :class:`PositionEmbedding`, ``s = sqrt(hidden_size)`` with
    ``scale_embeddings`` (Vaswani et al. 2017, sec. 3.4) and 1 without.

    Why the scale matters: an embedding table initialised with variance ``1/d`` per component
    (``char_bigram``) gives token vectors of norm ~1, while a sinusoidal position vector has norm
    ``sqrt(d/2)`` (~11 at d = 256), so without it the encoder's input is mostly position and the
    characters' identity starts as a small perturbation of it.

    ``forward(inputs, mask, batch)`` -> ``(e [B, n, hidden_size], char_mask [B, n])``: the
    characters taken by :func:`char_view` at positions ``0..n-1`` (word tokens of a lattice, if
    any, are ignored). ``embed(x [B, T, input_dim], positions [B, T])`` places any token at a
    character position of its own choosing (PLTE: a word at its first character)."""

    def __init__(self, input_dim: int, hidden_size: int, dropout: float,
                 positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal", max_length: int = 512,
                 scale_embeddings: bool = False):
        super().__init__()
        self.scale = math.sqrt(hidden_size) if scale_embeddings else 1.0
        self.projection = nn.Linear(input_dim, hidden_size) if input_dim != hidden_size else nn.Identity()
        self.positions = PositionEmbedding(hidden_size, positions, max_length)
        self.dropout = nn.Dropout(dropout)

    def embed(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        projected = self.projection(x)
        if self.scale != 1.0:
            projected = projected * self.scale
        return self.dropout(projected + self.positions(positions))

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor,
                batch: Optional[dict] = None) -> tuple[torch.Tensor, torch.Tensor]:
        x, char_mask = char_view(inputs, mask, batch)
        positions = torch.arange(x.shape[1], device=x.device).expand(x.shape[:2])
        return self.embed(x, positions), char_mask
