"""Lattice-BERT (Lai et al., NAACL 2021), §2.3: a BERT over a word lattice with lattice position
attention.

Input: every lattice token, characters and lexicon words, in one sequence (the ``LatticeBatch``
layout: characters at 0..n_b-1, words after, padding last), embedded at size E by the
``lattice_tokens`` embedder; [CLS] at position 0 (``cls``: ``first`` when the model packed one,
``prepend`` when the encoder inserts it: ``encoders/factorised.py``). No absolute position is
added to the inputs. H^0 = W_p LayerNorm(x) (E -> d, ALBERT's factorised embedding). Each of L
post-LayerNorm BERT layers attends with, per head (paper eqs. 1-2),

    score_ij = (H_i W^q).(H_j W^k) / sqrt(2 d_k) + att_ij + b_ij + r_ij
    att_ij   = ([P^S_{s_i}; P^E_{e_i}] U^q).([P^S_{s_j}; P^E_{e_j}] U^k) / sqrt(2 d_k)
    b_ij     = b^ss[s_j - s_i] + b^se[s_j - e_i] + b^es[e_j - s_i] + b^ee[e_j - e_i]   (clipped to +-128)
    r_ij     = r[rel(i, j)]      (7 relations: self, left/right detached, left/right overlap,
                                  contains, contained-by: ``lattice.structure.lattice_bert_relations``)

with P^S, P^E ``[max_positions, E]`` learned, U^q, U^k ``[2E, h*d_k]``, b ``[4, 257, h]`` and r
``[7, h]`` per-head scalars. att + b + r (:class:`LatticePositionBias`) is computed ONCE per
forward as ``[B, h, T, T]`` and shared by all layers (the paper: "the lattice position attention
weights are shared over all layers"); nothing ``[B, T, T, d]`` is built. Following TUPE (Ke et
al. 2021) the position term of the [CLS] row is reset to a learned per-head scalar theta_1 and
that of the [CLS] column to theta_2. Ablation flags: ``use_distance`` (b), ``use_relation`` (r),
``use_absolute`` (att).

Output (``forward``): the states of the characters ``[B, n_max, d]``, as every lattice encoder
(with ``cls: first`` position 0 is the [CLS] state, which ``classifier`` pooling ``cls`` reads);
``encode_tokens`` gives every lattice token's state ``[B, T, d]`` and the [CLS] state ``[B, d]``.
``pretrained``: a pre-training run (``models/pretrainer.py``) whose ``encoder.`` tensors
initialise this encoder.
"""
from __future__ import annotations

import math
from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.factorised import FactorisedBertEncoder
from multigrain.components.lattice.structure import LB_PAD, lattice_bert_distances, lattice_bert_relations
from multigrain.platform.kinds import Encoder


class LatticePositionBias(nn.Module):
    """att_ij + b_ij + r_ij with the [CLS] reset: ``[B, h, T, T]`` float, -inf at padded keys.

    ``starts/ends [B, T]`` long (character positions, [CLS] at token 0), ``mask [B, T]`` bool."""

    def __init__(self, embedding_dim: int, num_heads: int, head_dim: int, max_positions: int = 512, clip: int = 128,
                 use_absolute: bool = True, use_distance: bool = True, use_relation: bool = True):
        super().__init__()
        self.num_heads, self.head_dim, self.clip, self.max_positions = num_heads, head_dim, clip, max_positions
        self.use_absolute, self.use_distance, self.use_relation = use_absolute, use_distance, use_relation
        # only the enabled terms own parameters (a data-parallel run needs every parameter used)
        if use_absolute:
            self.start_positions = nn.Embedding(max_positions, embedding_dim)  # P^S
            self.end_positions = nn.Embedding(max_positions, embedding_dim)  # P^E
            self.position_query = nn.Linear(2 * embedding_dim, num_heads * head_dim, bias=False)  # U^q
            self.position_key = nn.Linear(2 * embedding_dim, num_heads * head_dim, bias=False)  # U^k
        if use_distance:
            self.distance = nn.Parameter(torch.zeros(4, 2 * clip + 1, num_heads))  # b^ss, b^se, b^es, b^ee
        if use_relation:
            self.relation = nn.Parameter(torch.zeros(LB_PAD + 1, num_heads))  # row LB_PAD: padding pairs
        self.cls_to_others = nn.Parameter(torch.zeros(num_heads))  # theta_1: the [CLS] row
        self.others_to_cls = nn.Parameter(torch.zeros(num_heads))  # theta_2: the [CLS] column

    def absolute(self, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        """att ``[B, h, T, T]``."""
        p = torch.cat([self.start_positions(starts), self.end_positions(ends)], -1)  # [B, T, 2E]
        q = self.position_query(p).unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.position_key(p).unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
        return q @ k.transpose(-1, -2) / math.sqrt(2 * self.head_dim)

    def forward(self, starts: torch.Tensor, ends: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, T = starts.shape
        top = int(ends.max()) if ends.numel() else 0
        if top >= self.max_positions:
            raise ValueError(f"character position {top} >= max_positions {self.max_positions} of lattice_bert")
        scalars = starts.new_zeros((), dtype=torch.float32).expand(B, T, T, self.num_heads)  # [B, T, T, h]
        if self.use_distance:
            distances = lattice_bert_distances(starts, ends, self.clip)  # [B, T, T, 4] ids
            for c in range(4):  # the four tables, one gather each
                scalars = scalars + self.distance[c][distances[..., c]]
        if self.use_relation:
            scalars = scalars + self.relation[lattice_bert_relations(starts, ends, mask)]
        bias = scalars.permute(0, 3, 1, 2)  # [B, h, T, T]
        if self.use_absolute:
            bias = bias + self.absolute(starts, ends)
        first = torch.arange(T, device=starts.device) == 0
        bias = torch.where(first.view(1, 1, 1, T), self.others_to_cls.view(1, -1, 1, 1), bias)
        bias = torch.where(first.view(1, 1, T, 1), self.cls_to_others.view(1, -1, 1, 1), bias)
        return bias.masked_fill(~mask[:, None, None, :], float("-inf"))


@Encoder.register("lattice_bert")
class LatticeBertEncoder(FactorisedBertEncoder):
    """See the module docstring. Sizes: tiny E128/d256/L4/h4, lite E128/d512/L6/h8, base
    E128/d768/L12/h12 (``jsonnet_configs/lib/lattice_bert.libsonnet``)."""
    weight_sources = ("pretrained",)

    def __init__(self, input_dim: int, hidden_size: int = 256, num_layers: int = 4, num_heads: int = 4,
                 intermediate_size: Optional[int] = None, max_positions: int = 512, clip: int = 128,
                 dropout: float = 0.1, attention_dropout: float = 0.1, cls: Literal["first", "prepend"] = "prepend",
                 use_absolute: bool = True, use_distance: bool = True, use_relation: bool = True,
                 pretrained: Optional[str] = None):
        head_dim = hidden_size // num_heads if num_heads and hidden_size % num_heads == 0 else 1
        super().__init__(input_dim, hidden_size, num_layers, num_heads, intermediate_size, dropout,
                         attention_dropout, cls, scale=1.0 / math.sqrt(2 * head_dim))
        self.position_bias = LatticePositionBias(input_dim, num_heads, self.head_dim, max_positions, clip,
                                                 use_absolute, use_distance, use_relation)
        self.init_weights(pretrained)

    @property
    def max_characters(self) -> int:
        """The most characters one row may hold (text positions start at 0, beside [CLS])."""
        return self.position_bias.max_positions

    def encode_tokens(self, inputs: torch.Tensor, lattice) -> tuple[torch.Tensor, torch.Tensor]:
        """``inputs [B, T, E]`` in ``lattice``'s layout -> (states of every token ``[B, T, d]`` in
        that layout, the [CLS] state ``[B, d]``)."""
        if inputs.shape[1] != lattice.mask.shape[1]:
            raise ValueError(f"lattice_bert needs a vector for every lattice token ({lattice.mask.shape[1]} "
                             f"positions), got {inputs.shape[1]}: use the lattice_tokens embedder")
        x, mask, starts, ends = self.with_cls(inputs, lattice.mask, lattice.starts, lattice.ends)
        states = self.run_layers(x, self.position_bias(starts, ends, mask))
        return self.without_cls(states), states[:, 0]

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: dict) -> torch.Tensor:
        lattice = batch["lattice"]
        return self.encode_tokens(inputs, lattice)[0][:, : lattice.max_chars]
