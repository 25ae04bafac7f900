"""MWA: multi-source word-aligned attention (Li et al., ACL 2020), a layer on a backbone's output.

Given character states H [B, n, d] and S segmentations ``seg_ids [B, S, n]`` (from
``batch["lattice"].seg_ids``; -1 past a row's end), paper §2.2-2.3:

    A   = softmax(Q K^T / sqrt(d_k))            per head, [B, h, n, n], Q = H W_q, K = H W_k  (eq. 2)
    A'_s: for every word of segmentation s, the rows (``pool_over="query"``, the paper) or the
          columns (``"key"``, the released code) of its characters are replaced by
          λ·max + (1-λ)·mean of those rows/columns                     (eqs. 4-5)
    H_s = concat_h(A'_s,h · H W_v,h) W_o                                (eqs. 6-7)
    out = sum_s tanh(H_s W_g)  (+ H with ``add_input``)                  (eq. 8)

The projections W_q, W_k, W_v, W_o are a :class:`MultiHeadAttention` of ``components/nn``
whose probabilities A MWA pools before the values; they are shared by the segmentations (so
A is computed once); λ is one learnable scalar (init 0.5). ``A'_s V`` is computed without
building ``A'_s``: the mean part is linear (pooled ``A V`` rows, or ``A`` times word-mean
values), the max part gathers the attention entries found by a running arg-max within words
(log2 of the longest word elementwise steps, no loop over words); the loop over
segmentations is over S (a handful).
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.sized import SizedEncoder
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.old_names import accept_old_names
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder


def word_bounds(seg_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First and last position of each position's word: ``seg_ids [B, n]`` -> two ``[B, n]``.

    A word is a run of equal ids (segmentations are contiguous); every padding position (-1)
    is a word of its own.
    """
    B, n = seg_ids.shape
    pos = torch.arange(n, device=seg_ids.device).expand(B, n)
    first = torch.ones_like(seg_ids, dtype=torch.bool)
    first[:, 1:] = (seg_ids[:, 1:] != seg_ids[:, :-1]) | (seg_ids[:, 1:] < 0)
    last = torch.ones_like(first)
    last[:, :-1] = first[:, 1:]
    start = torch.where(first, pos, 0).cummax(1).values
    end = torch.where(last, pos, n).flip(1).cummin(1).values.flip(1)
    return start, end


def _doubling_steps(start: torch.Tensor, n: int, longest: Optional[int] = None):
    """Hillis-Steele doubling within words: yields (step, valid [B, n - step]) where ``valid``
    says the position ``step`` back lies in the same word; ceil(log2(longest word)) steps.
    ``longest``: a bound on the longest word known on the host (a step past it changes nothing),
    else read from the device."""
    offset = torch.arange(n, device=start.device) - start  # position within its word, [B, n]
    if longest is None:
        longest = int(offset.max()) + 1 if n else 0
    longest = min(longest, n)
    step = 1
    while step < longest:
        yield step, offset[:, step:] >= step
        step *= 2


def segment_sum(x: torch.Tensor, start: torch.Tensor, longest: Optional[int] = None) -> torch.Tensor:
    """Running sum within words along dim 2 of x ``[B, h, n, k]``; start ``[B, n]`` from
    :func:`word_bounds`. At a word's last position: the sum over the word."""
    n = x.shape[2]
    for step, valid in _doubling_steps(start, n, longest):
        hi = x[:, :, step:]
        x = torch.cat([x[:, :, :step], torch.where(valid[:, None, :, None], hi + x[:, :, : n - step], hi)], 2)
    return x


@torch.no_grad()
def segment_argmax(x: torch.Tensor, start: torch.Tensor, dim: int, longest: Optional[int] = None) -> torch.Tensor:
    """Index along ``dim`` (2 or 3) of the running maximum within words of x ``[B, h, n, n]``:
    at a word's last position, where in the word the maximum is (first one on ties). Computed
    without autograd; ``x.gather(dim, index)`` then takes the maximum with a gather's cheap
    backward, where a differentiable scan would keep every step's masks."""
    n = x.shape[dim]
    shape = [1, 1, 1, 1]
    shape[dim] = n
    best = x.clone()
    index = torch.arange(n, device=x.device, dtype=torch.int32).view(shape).expand_as(x).clone()
    for step, valid in _doubling_steps(start, n, longest):
        shape = [x.shape[0], 1, 1, 1]
        shape[dim] = n - step
        head, tail = best.narrow(dim, 0, n - step), best.narrow(dim, step, n - step)
        earlier = valid.view(shape) & (head >= tail)
        new_index = torch.where(earlier, index.narrow(dim, 0, n - step), index.narrow(dim, step, n - step))
        best.narrow(dim, step, n - step).copy_(torch.where(earlier, head, tail))
        index.narrow(dim, step, n - step).copy_(new_index)
    return index.long()  # int32 while scanning: half the memory traffic


def word_aligned_attend(attention: torch.Tensor, values: torch.Tensor, seg_ids: torch.Tensor, lam: torch.Tensor,
                        pool_over: str = "query", attended: Optional[torch.Tensor] = None,
                        longest: Optional[int] = None) -> torch.Tensor:
    """``A' V``: attention pooled within words (λ·max + (1-λ)·mean), applied to the values.

    attention ``[B, h, n, n]``; values ``[B, h, n, dk]``; seg_ids ``[B, n]`` (-1 = padding);
    ``attended`` = ``attention @ values`` when the caller already has it; ``longest``: a bound on
    the longest word known on the host (``LatticeBatch.longest_segment``). Returns ``[B, h, n, dk]``.

    The mean is linear, so it never needs pooled ``[n, n]`` rows: with ``query`` pooling (a
    word's rows) it is the mean of the word's ``A V`` rows; with ``key`` pooling (a word's
    columns) it is ``A`` times each character's word-mean value. The max takes, per word and
    column (``query``) or per row and word (``key``), the attention entry where it lies.
    """
    B, h, n, dk = values.shape
    start, end = word_bounds(seg_ids)
    length = (end - start + 1).to(values.dtype)[:, None, :, None]              # [B, 1, n, 1]
    last = end[:, None, :, None]
    if pool_over == "query":
        if attended is None:
            attended = attention @ values
        maxed = attention.gather(2, segment_argmax(attention, start, 2, longest)) @ values  # row i: max so far
        mixed = lam * maxed + (1 - lam) * segment_sum(attended, start, longest) / length
        return mixed.gather(2, last.expand(B, h, n, dk))                        # every row from its word's end
    if pool_over == "key":
        word_values = segment_sum(values, start, longest).gather(2, last.expand(B, h, n, dk))  # sum of j's word
        is_end = (end == torch.arange(n, device=end.device))[:, None, None, :]
        maxed = attention.gather(3, segment_argmax(attention, start, 3, longest)) * is_end  # column e: its word's max
        return lam * (maxed @ word_values) + (1 - lam) * (attention @ (word_values / length))
    raise ValueError(f"pool_over must be 'query' or 'key', got {pool_over!r}")


@Encoder.register("mwa")
class MwaEncoder(SizedEncoder):
    """``forward(inputs [B, n, d], mask [B, n], batch with lattice.seg_ids [B, S, n]) -> [B, n, d]``.

    ``segmentations``: which rows of seg_ids to use (default all). ``dropout`` applies to the
    fused output. Archives saved before ``components/nn`` named the projections ``query``,
    ``key``, ``value``, ``output``; they load into ``attention.q``, ``.k``, ``.v``, ``.out``.
    """

    def __init__(self, input_dim: int, num_heads: int = 8, pool_over: Literal["query", "key"] = "query",
                 lambda_init: float = 0.5, add_input: bool = False, segmentations: Optional[list[int]] = None,
                 dropout: float = 0.1):
        super().__init__()
        if pool_over not in ("query", "key"):
            raise ConfigurationError(f"mwa: pool_over must be 'query' or 'key', got {pool_over!r}")
        self.input_dim = self.output_dim = input_dim
        self.pool_over, self.add_input, self.segmentations = pool_over, add_input, segmentations
        self.attention = MultiHeadAttention(input_dim, num_heads)
        self.gate = nn.Linear(input_dim, input_dim, bias=False)
        self.lam = nn.Parameter(torch.tensor(float(lambda_init)))
        self.dropout = nn.Dropout(dropout)
        accept_old_names(self, {"query.": "attention.q.", "key.": "attention.k.", "value.": "attention.v.",
                                "output.": "attention.out."})

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        lattice = (batch or {}).get("lattice")
        if lattice is None or lattice.seg_ids is None:
            raise ConfigurationError("mwa needs segmentations: give the reader a lattice_builder that produces "
                                     "seg_ids (segmenter, voting, or a union of them)")
        seg = lattice.seg_ids[:, :, : inputs.shape[1]]
        rows = self.segmentations if self.segmentations is not None else range(seg.shape[1])
        if any(not 0 <= s < seg.shape[1] for s in rows):
            raise ConfigurationError(f"mwa.segmentations {list(rows)}: the lattices have {seg.shape[1]} segmentations")
        attention = self.attention.weights(inputs, key_mask=mask)  # A [B, h, n, n], eq. 2
        values = self.attention.heads(self.attention.v(inputs))  # V W_v [B, h, n, dk]
        attended = attention @ values if self.pool_over == "query" else None  # shared by the segmentations
        fused = inputs if self.add_input else torch.zeros_like(inputs)
        for s in rows:
            aligned = word_aligned_attend(attention, values, seg[:, s], self.lam, self.pool_over, attended,
                                          getattr(lattice, "longest_segment", None))
            fused = fused + torch.tanh(self.gate(self.attention.merge(aligned)))  # eqs. 6-8
        return self.dropout(fused)
