"""Sentences longer than a backbone's positions, read in overlapping windows and joined back.

A BERT-shaped backbone (``hf_transformer``: 512 positions, 510 characters between [CLS] and
[SEP]) or a learned-position encoder (``char_bert``, ``lattice_bert``: ``max_characters``)
cannot read a longer row; MSRA's test file has a sentence of 1,474 characters. A sentence of
``N > size`` characters is cut into windows ``[a_k, a_k + size)`` with

    a_k = min(k * (size - overlap), N - size),   k = 0 .. K-1,   K = ceil((N - size) / (size - overlap)) + 1

(the last window ends at the sentence's end), each window is one row of the batch (its lattice
keeps the words inside it), and every character takes its state from the window where it is
most central: the one maximising ``min(i - a_k, a_k + size - 1 - i)``, a window side that is the
sentence's own start or end counting as infinitely far (first window on ties). With an overlap
``o`` every character keeps at least ``o / 2`` characters of context on each side that another
window would cut. Nothing is truncated and no length is an error.

:func:`split_windows` makes the rows, :func:`join_central` puts the rows' states back in their
sentences (batched: one scatter of the per-position scores, no loop over windows).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from multigrain.platform.data import Instance


def window_bounds(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """``[(a_k, a_k + size)]`` covering ``0 .. n-1`` (one window ``(0, n)`` when ``n <= size``)."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"windows need size >= 1 and 0 <= overlap < size, got size {size}, overlap {overlap}")
    if n <= size:
        return [(0, n)]
    stride = size - overlap
    count = -(-(n - size) // stride) + 1
    return [(min(k * stride, n - size), min(k * stride, n - size) + size) for k in range(count)]


def default_overlap(size: int) -> int:
    """A quarter of the window (128 of 512 positions)."""
    return size // 4


def split_windows(instances: Sequence[Instance], size: Optional[int],
                  overlap: Optional[int] = None) -> tuple[list[Instance], Optional[list[tuple[int, int]]]]:
    """``(rows, layout)``: the instances and None when none is longer than ``size``; else one row
    per window (fields ``chars``, ``tags``, ``lattice`` cut alike) and per row
    ``(instance index, first character)``."""
    if size is None or all(len(x["chars"]) <= size for x in instances):
        return list(instances), None
    overlap = default_overlap(size) if overlap is None else overlap
    rows, layout = [], []
    for i, instance in enumerate(instances):
        for start, end in window_bounds(len(instance["chars"]), size, overlap):
            row = Instance({"chars": instance["chars"][start:end]}, source=instance.source)
            if "tags" in instance:
                row["tags"] = instance["tags"][start:end]
            if instance.get("lattice") is not None:
                row["lattice"] = instance["lattice"].piece(start, end)
            rows.append(row)
            layout.append((i, start))
    return rows, layout


def join_central(values: torch.Tensor, row_mask: torch.Tensor, instance: torch.Tensor, start: torch.Tensor,
                 whole_mask: torch.Tensor) -> torch.Tensor:
    """Rows' ``values [R, n, ...]`` (real at ``row_mask [R, n]``; row r holds characters
    ``start[r] ..`` of sentence ``instance[r]``) -> ``[B, N, ...]`` over ``whole_mask [B, N]``, each
    character from the row where it is most central (see the module docstring); 0 at padding."""
    R, n = row_mask.shape
    lengths = row_mask.sum(-1)  # [R]
    sentence_lengths = whole_mask.sum(-1)[instance]  # [R]
    j = torch.arange(n, device=row_mask.device).expand(R, n)
    big = n + 1
    left = torch.where((start > 0).unsqueeze(1), j, torch.full_like(j, big))
    right_gap = (lengths - 1).unsqueeze(1) - j
    right = torch.where((start + lengths < sentence_lengths).unsqueeze(1), right_gap, torch.full_like(j, big))
    # unique integer keys: centrality first, then the earlier row
    key = torch.minimum(left, right) * (R + 1) + (R - torch.arange(R, device=row_mask.device)).unsqueeze(1)
    r, p = row_mask.nonzero(as_tuple=True)
    b, i = instance[r], start[r] + p
    N = whole_mask.shape[1]
    flat = b * N + i
    best = torch.full((whole_mask.numel(),), -1, dtype=key.dtype, device=key.device)
    best = best.scatter_reduce(0, flat, key[r, p], reduce="amax")
    keep = key[r, p] == best[flat]
    out = values.new_zeros(whole_mask.shape + values.shape[2:])
    out[b[keep], i[keep]] = values[r[keep], p[keep]]
    return out
