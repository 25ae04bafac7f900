"""The self-attention cache of incremental decoding.

A decoder step appends one position's keys and values ``[N, h, 1, dh]`` and attends over every
position so far; beam search then moves rows (``reorder``). Growing the cache by ``torch.cat``
and reordering it by ``index_select`` would copy it twice per step. Here ``reorder`` copies the
rows into a contiguous tensor with one free position at the end, which the next ``append``
fills in place: one copy per step, and the attention reads contiguous keys and values (a strided
view of a larger preallocated buffer makes the batched matmuls copy; measured slower).
``append`` without a reorder before it concatenates.
"""
from __future__ import annotations

from typing import Optional

import torch


class KeyValueCache:
    """Keys and values ``[N, h, length, dh]`` of the positions decoded so far (see the module
    docstring). A step mutates the cache: a caller that needs an earlier state copies it."""

    def __init__(self):
        self.length = 0
        self.keys: Optional[torch.Tensor] = None  # [N, h, length or length + 1, dh]
        self.values: Optional[torch.Tensor] = None

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``[N, h, n, dh]`` keys/values; returns every cached position ``[N, h, length, dh]``."""
        n = keys.shape[2]
        if self.keys is None:
            self.keys, self.values = keys.contiguous(), values.contiguous()
        elif n == 1 and self.keys.shape[2] == self.length + 1:  # the free position a reorder left
            self.keys[:, :, self.length] = keys[:, :, 0]
            self.values[:, :, self.length] = values[:, :, 0]
        else:
            self.keys = torch.cat([self.keys[:, :, :self.length], keys], 2)
            self.values = torch.cat([self.values[:, :, :self.length], values], 2)
        self.length += n
        return self.keys, self.values

    def reorder(self, index: torch.Tensor) -> None:
        """Row i becomes the old row ``index[i]`` (``index [N]`` long)."""
        if self.keys is not None:
            self.keys, self.values = self._select(self.keys, index), self._select(self.values, index)

    def repeat_rows(self, times: int) -> None:
        """Each row repeated ``times`` times in place (row r -> rows r * times .. r * times + times - 1)."""
        if self.keys is not None:
            self.keys = self.keys[:, :, :self.length].repeat_interleave(times, 0)
            self.values = self.values[:, :, :self.length].repeat_interleave(times, 0)

    def _select(self, cached: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        n = self.length
        out = cached.new_empty(cached.shape[:2] + (n + 1,) + cached.shape[3:])
        torch.index_select(cached[:, :, :n], 0, index, out=out[:, :, :n])
        return out
