"""Masking for pre-training, vectorised over the batch (no loop over tokens or segments).

Masked segment prediction (Lattice-BERT paper §2.4): the lattice is cut into minimal segments
(``lattice.structure.segments``: a boundary after character t when no word spans t and t+1);
whole segments are chosen, in a random order, until about ``ratio`` (15%) of the row's eligible
tokens are chosen, never more than ``max_predictions`` (20) tokens in a row; every token of a
chosen segment, characters and words alike, is predicted. The paper's ``-MSP`` ablation (plain
MLM over lattice tokens) is the same procedure with every token a unit of its own
(``token_units``). The 80/10/10 rule is drawn per chosen *unit*: all of a segment's tokens
become [MASK] (80%), all become random tokens of their kind (10%) or all stay (10%), so no
token of a hidden segment is left visible.

Randomness: the caller passes uniform draws ``[B, T]``; the pretrainer makes them with
:func:`hashed_uniform`, a hash of (seed, training step, the example's key, position, stream), so
an example's masking depends on nothing else: not on the batch it is in, its padding or the
number of data-parallel workers. A batch's masking is reproducible and a resumed run masks as
the uninterrupted one would.
"""
from __future__ import annotations

import torch

#: what a chosen unit's tokens become
MASKED, RANDOM, KEPT = 0, 1, 2


def token_units(mask: torch.Tensor) -> torch.Tensor:
    """Every token a unit of its own: ``[B, T]`` ids ``0..T-1`` (-1 at padding)."""
    B, T = mask.shape
    return torch.arange(T, device=mask.device).expand(B, T).masked_fill(~mask, -1)


_MASK53 = (1 << 53) - 1


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 64-bit integer hash (splitmix64's finaliser; int64 arithmetic wraps around)."""
    x = x ^ (x >> 31)
    x = x * 0x7FB5D329728EA185
    x = x ^ (x >> 27)
    x = x * 0x4BE98134A5976FD3
    return x ^ (x >> 33)


def hashed_uniform(seed: int, step: int, keys: torch.Tensor, length: int, stream: int) -> torch.Tensor:
    """Uniform draws in [0, 1) ``[B, length]`` float: a hash of (seed, step, ``keys [B]`` long,
    position, ``stream``); the same example (key) at the same step gets the same draws in any batch."""
    position = torch.arange(length, device=keys.device)
    salt = _mix(torch.tensor([(seed * 1_000_003 + step) * 8 + stream], device=keys.device))
    x = _mix(_mix(keys.unsqueeze(1) ^ salt) + position.unsqueeze(0))
    return (x & _MASK53).double().div(float(1 << 53)).float()


def choose_units(units: torch.Tensor, eligible: torch.Tensor, ratio: float, max_predictions: int,
                 priority: torch.Tensor, draw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(chosen [B, T] bool per token, action [B, T] long per token)``.

    ``units [B, T]`` long: the unit (segment) id of each token, -1 at padding; ``eligible
    [B, T]`` bool: tokens that may be masked (not [CLS]/[SEP]); a unit is eligible when all its
    tokens are and it has at most ``max_predictions`` of them. Units are taken in a random
    order while fewer than ``round(ratio * eligible tokens)`` (at least 1) are chosen and the
    total stays within ``max_predictions``. ``action`` is MASKED/RANDOM/KEPT with probabilities
    0.8/0.1/0.1 per unit, the same for all its tokens (meaningless where not chosen).
    ``priority`` and ``draw`` ``[B, T]``: uniform draws, indexed by unit id (the order units are
    taken in; the action of each).
    """
    B, T = units.shape
    device = units.device
    real = units >= 0
    index = units.clamp(min=0)
    size = torch.zeros(B, T, dtype=torch.long, device=device).scatter_add_(1, index, real.long())
    allowed = torch.zeros_like(size).scatter_add_(1, index, (real & eligible).long())
    unit_ok = (size > 0) & (allowed == size) & (size <= max_predictions)  # [B, U=T]
    target = (eligible.sum(1).float() * ratio).round().clamp(min=1).long().unsqueeze(1)  # [B, 1]
    priority = priority.masked_fill(~unit_ok, 2.0)
    order = priority.argsort(1)
    sorted_size = (size * unit_ok).gather(1, order)
    taken = sorted_size.cumsum(1)
    chosen_sorted = unit_ok.gather(1, order) & (taken - sorted_size < target) & (taken <= max_predictions)
    chosen_unit = torch.zeros_like(unit_ok).scatter_(1, order, chosen_sorted)
    action_unit = (draw >= 0.8).long() + (draw >= 0.9).long()  # MASKED, RANDOM, KEPT
    chosen = chosen_unit.gather(1, index) & real
    return chosen, action_unit.gather(1, index)


def corrupt(ids: torch.Tensor, chosen: torch.Tensor, action: torch.Tensor, is_char: torch.Tensor, mask_id: int,
            char_range: tuple[int, int], word_range: tuple[int, int], uniform: torch.Tensor) -> torch.Tensor:
    """``ids [B, T]`` with chosen tokens replaced: [MASK] (``mask_id``), a random id of the
    token's kind (characters from ``char_range``, words from ``word_range``, half-open; drawn
    from ``uniform [B, T]``), or kept."""
    low = torch.where(is_char, char_range[0], word_range[0])
    high = torch.where(is_char, char_range[1], word_range[1])
    random_ids = low + (uniform * (high - low).clamp(min=1)).long().clamp(max=(high - low - 1).clamp(min=0))
    out = torch.where(chosen & (action == MASKED), torch.full_like(ids, mask_id), ids)
    return torch.where(chosen & (action == RANDOM), random_ids, out)
