"""Sentences longer than an encoder's positions, tagged in pieces.

An encoder with learned positions (``char_bert``, ``lattice_bert``: 512) cannot read a longer
row; MSRA's test file has a sentence of 1,474 characters. A sentence of more than ``limit``
characters is cut by :func:`multigrain.components.text.piece_bounds` (after the last sentence
end of each window, else at the window; a lattice keeps the words inside its piece), each piece
is one row of the batch, and the rows' outputs are put back in their sentences' positions
(:func:`join`) before decoding and scoring, so that metrics and predictions see whole sentences.
Each piece is encoded without the others' context: cutting at sentence ends keeps that loss small.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from multigrain.components.text import piece_bounds
from multigrain.platform.data import Instance


def split_long(instances: Sequence[Instance], limit: Optional[int]) -> tuple[list[Instance], Optional[list]]:
    """``(rows, layout)``: the instances themselves and None when none is longer than ``limit``;
    else their pieces (fields ``chars``, ``tags``, ``lattice`` cut alike) and ``layout``, per
    row ``(instance index, first character)``."""
    if limit is None or all(len(x["chars"]) <= limit for x in instances):
        return list(instances), None
    rows, layout = [], []
    for i, instance in enumerate(instances):
        for start, end in piece_bounds(instance["chars"], limit):
            row = Instance({"chars": instance["chars"][start:end]}, source=instance.source)
            if "tags" in instance:
                row["tags"] = instance["tags"][start:end]
            if instance.get("lattice") is not None:
                row["lattice"] = instance["lattice"].piece(start, end)
            rows.append(row)
            layout.append((i, start))
    return rows, layout


def join(values: torch.Tensor, row_mask: torch.Tensor, instance: torch.Tensor, start: torch.Tensor,
         whole_mask: torch.Tensor) -> torch.Tensor:
    """Rows' ``values [R, n, ...]`` at ``row_mask [R, n]`` into their sentences: ``[B, N, ...]``
    (``whole_mask [B, N]``), row r's position j at ``(instance[r], start[r] + j)``; 0 elsewhere."""
    out = values.new_zeros(whole_mask.shape + values.shape[2:])
    r, j = row_mask.nonzero(as_tuple=True)
    out[instance[r], start[r] + j] = values[r, j]
    return out
