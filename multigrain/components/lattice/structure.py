"""Structure of a lattice batch computed on the device from ``starts/ends``: relation ids,
distances, the BiG containment mask, Lattice-BERT segments, segmentation lengths.

Everything is a broadcast over ``[B, T, T]`` integer/bool tensors (never ``[B, T, T, d]``), with
no Python loop over tokens. Notation: query token i has span (p, q), key token j has (k, l).
"""
from __future__ import annotations

from typing import Optional

import torch

# ---------------------------------------------------------------------------------------------
# PLTE (porous lattice transformer encoder), PLTE paper §4.2, Figure 3, ids 0-based:
PLTE_LEFT_ADJACENT = 0  # r1: q == k - 1            (j starts right after i ends)
PLTE_RIGHT_ADJACENT = 1  # r2: l == p - 1           (j ends right before i starts)
PLTE_LEFT_INTERSECT = 2  # r3: p < k <= q < l
PLTE_RIGHT_INTERSECT = 3  # r4: k < p <= l < q
PLTE_INCLUDES = 4  # r5: p <= k <= l <= q            (identical spans, i == j included, are r5)
PLTE_INCLUDED_IN = 5  # r6: k <= p <= q <= l, not identical
PLTE_NON_NEIGHBOUR = 6  # r7: q < k - 1 or l < p - 1
PLTE_PIVOT = 7  # any pair involving the pivot token (row / column T when with_pivot)
PLTE_PAD = 8  # any pair involving a padding token
NUM_PLTE_RELATIONS = 9  # size of the RK / RV tables

# Lattice-BERT, 7 relations between i = (s_i, e_i) and j = (s_j, e_j):
LB_SELF = 0  # s_j == s_i and e_j == e_i
LB_LEFT_DETACHED = 1  # e_j < s_i                          (j wholly left of i)
LB_LEFT_OVERLAP = 2  # s_j < s_i <= e_j < e_i
LB_CONTAINS = 3  # s_i <= s_j and e_j <= e_i, not identical  (i contains j)
LB_CONTAINED_BY = 4  # s_j <= s_i and e_i <= e_j, not identical (j contains i)
LB_RIGHT_OVERLAP = 5  # s_i < s_j <= e_i < e_j
LB_RIGHT_DETACHED = 6  # s_j > e_i                         (j wholly right of i)
LB_PAD = 7  # any pair involving a padding token
NUM_LATTICE_BERT_RELATIONS = 7  # real relations; a table with a padding row has 8 rows


def _pair(starts: torch.Tensor, ends: torch.Tensor):
    p, q = starts.unsqueeze(2), ends.unsqueeze(2)  # query i: [B, T, 1]
    k, l = starts.unsqueeze(1), ends.unsqueeze(1)  # key j:   [B, 1, T]
    return p, q, k, l


def plte_relations(
    starts: torch.Tensor, ends: torch.Tensor, mask: torch.Tensor, with_pivot: bool = False
) -> torch.Tensor:
    """PLTE relation id of every token pair: ``[B, T, T]`` long (``[B, T+1, T+1]`` with_pivot).

    ``rel[b, i, j]`` is the relation of key j seen from query i (ids ``PLTE_*`` above). The seven
    geometric relations partition every pair of real tokens; where two definitions meet
    (identical spans satisfy both r5 and r6) r5 wins. Pairs with a padding token are
    ``PLTE_PAD``. With ``with_pivot`` a pivot token is appended at position T of both axes: its
    row and column are ``PLTE_PIVOT`` for real tokens (and the pivot itself), ``PLTE_PAD`` for
    padding ones.
    """
    p, q, k, l = _pair(starts, ends)
    overlap = (p <= l) & (k <= q)
    # built in uint8 (8x less memory for the [B, T, T] temporaries), returned as long
    rel = torch.full(p.shape[:1] + (starts.shape[1], starts.shape[1]), PLTE_NON_NEIGHBOUR,
                     dtype=torch.uint8, device=starts.device)
    rel = rel.masked_fill(q == k - 1, PLTE_LEFT_ADJACENT)
    rel = rel.masked_fill(l == p - 1, PLTE_RIGHT_ADJACENT)
    # overlapping pairs: the four cases are tried from the least to the most specific
    rel = torch.where(overlap & (p < k), PLTE_LEFT_INTERSECT, rel)
    rel = torch.where(overlap & (k < p), PLTE_RIGHT_INTERSECT, rel)
    rel = torch.where(overlap & (k <= p) & (q <= l), PLTE_INCLUDED_IN, rel)
    rel = torch.where(overlap & (p <= k) & (l <= q), PLTE_INCLUDES, rel)
    real = mask.unsqueeze(2) & mask.unsqueeze(1)
    rel = rel.masked_fill(~real, PLTE_PAD).long()
    if with_pivot:
        B, T = mask.shape
        side = torch.where(mask, PLTE_PIVOT, PLTE_PAD)  # [B, T]
        corner = torch.full((B, 1, 1), PLTE_PIVOT, dtype=torch.long, device=rel.device)
        rel = torch.cat([rel, side.unsqueeze(2)], dim=2)
        rel = torch.cat([rel, torch.cat([side.unsqueeze(1), corner], dim=2)], dim=1)
    return rel


def porous_mask(rel: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """PLTE's porous attention mask ``[B, T', T']`` bool from ``plte_relations`` ids.

    True iff the relation is r1..r6 or the pivot, and both tokens are real. ``mask`` is
    ``[B, T]``; when ``rel`` has the pivot appended (T' = T + 1) the pivot counts as real.
    Rows of padding tokens are all False: mask them out of the output, or let them attend to
    something, before a softmax.
    """
    if rel.shape[-1] == mask.shape[1] + 1:
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
    allowed = (rel <= PLTE_INCLUDED_IN) | (rel == PLTE_PIVOT)
    return allowed & mask.unsqueeze(2) & mask.unsqueeze(1)


def lattice_bert_relations(starts: torch.Tensor, ends: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Lattice-BERT relation id (``LB_*``) of key j seen from query i: ``[B, T, T]`` long.

    The seven relations partition every pair of real tokens; pairs with padding get ``LB_PAD``.
    """
    si, ei, sj, ej = _pair(starts, ends)
    # [B, T, T] uint8 (returned as long): detached unless overlapping
    rel = (sj > ei).to(torch.uint8) * (LB_RIGHT_DETACHED - LB_LEFT_DETACHED) + LB_LEFT_DETACHED
    overlap = (si <= ej) & (sj <= ei)
    rel = torch.where(overlap & (sj < si) & (ej < ei), LB_LEFT_OVERLAP, rel)
    rel = torch.where(overlap & (sj > si) & (ej > ei), LB_RIGHT_OVERLAP, rel)
    rel = torch.where((sj <= si) & (ei <= ej), LB_CONTAINED_BY, rel)
    rel = torch.where((si <= sj) & (ej <= ei), LB_CONTAINS, rel)
    rel = torch.where((si == sj) & (ei == ej), LB_SELF, rel)
    return rel.masked_fill(~(mask.unsqueeze(2) & mask.unsqueeze(1)), LB_PAD).long()


def lattice_bert_distances(starts: torch.Tensor, ends: torch.Tensor, clip: int = 128) -> torch.Tensor:
    """Lattice-BERT's four relative distances ``[B, T, T, 4]`` long, shifted to ``[0, 2*clip]``.

    Channel c of ``out[b, i, j]`` is, clipped to [-clip, clip] then plus clip:
    0: s_j - s_i, 1: s_j - e_i, 2: e_j - s_i, 3: e_j - e_i. Padding pairs hold valid but
    meaningless ids (padding spans are (0, 0)).
    """
    si, ei, sj, ej = _pair(starts, ends)
    d = torch.stack(torch.broadcast_tensors(sj - si, sj - ei, ej - si, ej - ei), dim=-1)
    return d.clamp(-clip, clip) + clip


def word_slots(is_char: torch.Tensor, mask: torch.Tensor, max_words: Optional[int] = None):
    """Word slots of each row: ``(word_index [B, W], word_mask [B, W])``.

    Word slot w of row b is the token at position ``n_b + w`` (words follow the characters);
    ``word_index`` gives that position (clamped to T-1 at empty slots, which ``word_mask`` marks
    False). W = ``max_words`` or the batch's largest word count (one device sync).
    """
    n = is_char.sum(1)  # [B]
    m = (mask & ~is_char).sum(1)
    W = int(m.max()) if max_words is None else max_words
    slot = torch.arange(W, device=is_char.device)
    word_index = (n.unsqueeze(1) + slot).clamp(max=max(is_char.shape[1] - 1, 0))
    return word_index, slot < m.unsqueeze(1)


def containment_mask(
    starts: torch.Tensor,
    ends: torch.Tensor,
    is_char: torch.Tensor,
    mask: torch.Tensor,
    include_self: bool = True,
    max_chars: Optional[int] = None,
    max_words: Optional[int] = None,
) -> torch.Tensor:
    """BiG-Transformer's bipartite mask ``[B, n_max, W + 2]`` bool: what character i attends to.

    Columns: ``0..W-1`` word slots (see ``word_slots``; True iff the slot's word contains
    character i), ``W`` the character itself as a length-1 word (True iff ``include_self``),
    ``W + 1`` the sentence node (always True, also on padding rows so no softmax row is empty).
    Rows past a row's last character are False except the sentence column.
    """
    n_max = int(is_char.sum(1).max()) if max_chars is None else max_chars
    word_index, word_mask = word_slots(is_char, mask, max_words)
    ws = starts.gather(1, word_index).unsqueeze(1)  # [B, 1, W]
    we = ends.gather(1, word_index).unsqueeze(1)
    char_real = is_char[:, :n_max]  # [B, n]
    i = torch.arange(n_max, device=starts.device).view(1, -1, 1)
    inside = (ws <= i) & (i <= we) & word_mask.unsqueeze(1) & char_real.unsqueeze(2)
    own = char_real.unsqueeze(2) & include_self
    sentence = torch.ones_like(own)
    return torch.cat([inside, own, sentence], dim=2)


def segments(starts: torch.Tensor, ends: torch.Tensor, n_chars: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Lattice-BERT segment id of each token ``[B, T]`` long (-1 at padding).

    A boundary falls after character t iff no token spans t and t+1 (start <= t < end); the
    segment of character t is the number of boundaries before it, and every token takes the
    segment of its start character. O(T): a difference array of +1 at start, -1 at end per
    token, a cumulative sum gives the number of tokens crossing each gap. (``n_chars`` is not
    needed: character tokens never cross a gap and padding is masked; it is accepted so that all
    structure functions take the batch's fields alike.)
    """
    B, T = starts.shape
    real = mask.long()
    diff = torch.zeros(B, T + 1, dtype=torch.long, device=starts.device)
    diff.scatter_add_(1, starts, real)
    diff.scatter_add_(1, ends, -real)
    crossing = diff.cumsum(1)[:, :T]  # [B, T]: tokens spanning gap (t, t+1)
    boundary = (crossing == 0).long()
    char_segment = boundary.cumsum(1) - boundary  # boundaries strictly before t
    seg = char_segment.gather(1, starts)
    return seg.masked_fill(~mask, -1)


def segment_lengths(seg_ids: torch.Tensor, char_mask: torch.Tensor) -> torch.Tensor:
    """Length of each segment ``[B, S, n]`` long indexed by segment id (0 at unused ids).

    ``seg_ids`` ``[B, S, n]`` (``SEG_PAD`` past the last character), ``char_mask`` ``[B, n]``.
    """
    real = char_mask.unsqueeze(1).expand_as(seg_ids)
    idx = seg_ids.clamp(min=0)
    return torch.zeros_like(seg_ids).scatter_add_(2, idx, real.long())


def char_segment_lengths(seg_ids: torch.Tensor, char_mask: torch.Tensor) -> torch.Tensor:
    """Length of the segment containing each character ``[B, S, n]`` long (0 at padding)."""
    lengths = segment_lengths(seg_ids, char_mask)
    out = lengths.gather(2, seg_ids.clamp(min=0))
    return out.masked_fill(~char_mask.unsqueeze(1), 0)


def num_segments(seg_ids: torch.Tensor) -> torch.Tensor:
    """Number of segments of each segmentation ``[B, S]`` long."""
    return seg_ids.max(2).values + 1
