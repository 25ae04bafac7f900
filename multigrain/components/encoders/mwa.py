"""MWA: multi-source word-aligned attention (Li et al., ACL 2020), a layer on a backbone's output.

Given character states H [B, n, d] and S segmentations ``seg_ids [B, S, n]`` (from
``batch["lattice"].seg_ids``; -1 past a row's end):

    A   = softmax(Q K^T / sqrt(d_k))            per head, [B, h, n, n], Q = H W_q, K = H W_k
    A'_s: for every word of segmentation s, the rows (``pool_over="query"``, the paper) or the
          columns (``"key"``, the released code) of its characters are replaced by
          λ·max + (1-λ)·mean of those rows/columns                     (eqs. 4-5)
    H_s = concat_h(A'_s,h · H W_v,h) W_o                                (eqs. 6-7)
    out = sum_s tanh(H_s W_g)  (+ H with ``add_input``)                  (eq. 8)

The attention projections are shared by the segmentations (so A is computed once); λ is one
learnable scalar (init 0.5). The pooling is a ``scatter_reduce`` over the segment ids, with no
loop over words; the loop over segmentations is over S (a handful).
"""
from __future__ import annotations

import math
from typing import Literal, Optional

import torch
from torch import nn

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder


def word_aligned_pool(attention: torch.Tensor, seg_ids: torch.Tensor, lam: torch.Tensor,
                      pool_over: str = "query") -> torch.Tensor:
    """Mixed max/mean pooling of attention rows (``query``) or columns (``key``) within words.

    attention ``[B, h, n, n]``; seg_ids ``[B, n]`` word index of each position (-1 = padding,
    pooled apart from everything real). Returns ``[B, h, n, n]``.
    """
    B, h, n, _ = attention.shape
    slots = seg_ids.masked_fill(seg_ids < 0, n)  # padding -> a spare slot n
    dim = 2 if pool_over == "query" else 3
    if pool_over == "query":
        index = slots[:, None, :, None].expand(B, h, n, n)
        size = (B, h, n + 1, n)
    elif pool_over == "key":
        index = slots[:, None, None, :].expand(B, h, n, n)
        size = (B, h, n, n + 1)
    else:
        raise ValueError(f"pool_over must be 'query' or 'key', got {pool_over!r}")
    empty = attention.new_zeros(size)
    maxed = empty.scatter_reduce(dim, index, attention, "amax", include_self=False)
    mean = empty.scatter_reduce(dim, index, attention, "mean", include_self=False)
    pooled = lam * maxed + (1 - lam) * mean
    return pooled.gather(dim, index)


@Encoder.register("mwa")
class MwaEncoder(Encoder):
    """``forward(inputs [B, n, d], mask [B, n], batch with lattice.seg_ids [B, S, n]) -> [B, n, d]``.

    ``segmentations``: which rows of seg_ids to use (default all). ``dropout`` applies to the
    fused output.
    """

    def __init__(self, input_dim: int, num_heads: int = 8, pool_over: Literal["query", "key"] = "query",
                 lambda_init: float = 0.5, add_input: bool = False, segmentations: Optional[list[int]] = None,
                 dropout: float = 0.1):
        super().__init__()
        if input_dim % num_heads:
            raise ConfigurationError(f"mwa: input_dim {input_dim} is not a multiple of num_heads {num_heads}")
        if pool_over not in ("query", "key"):
            raise ConfigurationError(f"mwa: pool_over must be 'query' or 'key', got {pool_over!r}")
        self.input_dim = input_dim
        self.num_heads = num_heads
        self.pool_over = pool_over
        self.add_input = add_input
        self.segmentations = segmentations
        self.query = nn.Linear(input_dim, input_dim)
        self.key = nn.Linear(input_dim, input_dim)
        self.value = nn.Linear(input_dim, input_dim)
        self.output = nn.Linear(input_dim, input_dim)
        self.gate = nn.Linear(input_dim, input_dim, bias=False)
        self.lam = nn.Parameter(torch.tensor(float(lambda_init)))
        self.dropout = nn.Dropout(dropout)

    def get_input_dim(self) -> int:
        return self.input_dim

    def get_output_dim(self) -> int:
        return self.input_dim

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        B, n, d = x.shape
        return x.view(B, n, self.num_heads, d // self.num_heads).transpose(1, 2)  # [B, h, n, dk]

    def attention(self, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Character-level attention A ``[B, h, n, n]`` (padding keys get weight 0)."""
        q, k = self._heads(self.query(inputs)), self._heads(self.key(inputs))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return scores.masked_fill(~mask[:, None, None, :], float("-inf")).softmax(-1)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        lattice = (batch or {}).get("lattice")
        if lattice is None or lattice.seg_ids is None:
            raise ConfigurationError("mwa needs segmentations: give the reader a lattice_builder that produces "
                                     "seg_ids (segmenter, voting, or a union of them)")
        seg = lattice.seg_ids[:, :, : inputs.shape[1]]
        rows = self.segmentations if self.segmentations is not None else range(seg.shape[1])
        if any(not 0 <= s < seg.shape[1] for s in rows):
            raise ConfigurationError(f"mwa.segmentations {list(rows)}: the lattices have {seg.shape[1]} segmentations")
        B, n, d = inputs.shape
        attention = self.attention(inputs, mask)
        values = self._heads(self.value(inputs))
        fused = inputs if self.add_input else torch.zeros_like(inputs)
        for s in rows:
            aligned = word_aligned_pool(attention, seg[:, s], self.lam, self.pool_over)
            states = (aligned @ values).transpose(1, 2).reshape(B, n, d)
            fused = fused + torch.tanh(self.gate(self.output(states)))
        return self.dropout(fused)
