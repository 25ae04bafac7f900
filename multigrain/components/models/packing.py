"""Packing texts into one model input, BERT-style: ``[CLS] a [SEP]`` (classification),
``[CLS] a [SEP] b [SEP]`` (pairs), ``[CLS] question [SEP] context-window [SEP]`` (MRC).

Segment ids are 0 up to and including the first ``[SEP]`` and 1 after. The texts' lattices are
packed the same way, into one lattice over the packed sequence (``[CLS]`` at character
position 0): special tokens, and texts without a lattice such as an MRC question, are one
segment per position in every segmentation and carry no word. Bigrams are each text's own
(``bigrams_of``), None at special tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union

import numpy as np

from multigrain.components.lattice.types import Lattice
from multigrain.components.text import bigrams_of

CLS, SEP = "[CLS]", "[SEP]"


@dataclass(frozen=True)
class Part:
    """Characters ``chars[lo:hi]`` of one text and its lattice (or None)."""

    chars: Sequence[str]
    lattice: Optional[Lattice]
    lo: int = 0
    hi: Optional[int] = None

    @property
    def end(self) -> int:
        return len(self.chars) if self.hi is None else self.hi


@dataclass
class Packed:
    tokens: list[str]
    segments: list[int]
    special: list[bool]
    lattice: Optional[Lattice]
    bigrams: Optional[list[Optional[str]]] = None  # per position; None at special tokens


def pack(pieces: Sequence[Union[str, Part]], second_segment_after: int = 1) -> Packed:
    """Concatenate special tokens (strings) and text parts into one sequence and one lattice.

    Segment id 0 until the ``second_segment_after``-th ``[SEP]`` included, 1 after. A part's
    words are kept when they lie inside ``[lo, hi)``; its segmentation rows are cut to the slice
    and renumbered. The lattice is None when no part has one; ``seg_ids`` is None when no
    part's lattice has them.
    """
    tokens: list[str] = []
    segments: list[int] = []
    special: list[bool] = []
    bigrams: list[Optional[str]] = []
    seps = 0
    for piece in pieces:
        segment = 0 if seps < second_segment_after else 1
        if isinstance(piece, str):
            tokens.append(piece)
            special.append(True)
            segments.append(segment)
            seps += piece == SEP
            bigrams.append(None)
        else:
            chunk = list(piece.chars[piece.lo:piece.end])
            # one character past the slice, so its last bigram is the text's own (or the end marker)
            bigrams.extend(bigrams_of(list(piece.chars[piece.lo:piece.end + 1]))[:len(chunk)])
            tokens.extend(chunk)
            special.extend([False] * len(chunk))
            segments.extend([segment] * len(chunk))
    parts = [p for p in pieces if isinstance(p, Part)]
    if not any(p.lattice is not None for p in parts):
        return Packed(tokens, segments, special, None, bigrams)
    n_seg = max((p.lattice.seg_ids.shape[0] for p in parts if p.lattice is not None and p.lattice.seg_ids is not None),
                default=0)
    spans, texts, sources, seg_rows = [], [], [], []
    offset = 0
    next_segment = np.zeros(n_seg, dtype=np.int64)
    for piece in pieces:
        if isinstance(piece, str):
            length, lat, lo = 1, None, 0
        else:
            length, lat, lo = piece.end - piece.lo, piece.lattice, piece.lo
        if lat is not None and lat.n_words:
            n = lat.n_chars
            words = lat.spans[n:].astype(np.int64)
            keep = (words[:, 0] >= lo) & (words[:, 1] < lo + length)
            spans.append(words[keep] - lo + offset)
            texts.extend(t for t, k in zip(lat.token_text[n:], keep.tolist()) if k)
            sources.append(lat.sources[n:][keep])
        if n_seg:
            if lat is not None and lat.seg_ids is not None and length:
                if lat.seg_ids.shape[0] != n_seg:
                    raise ValueError(f"texts of one example have {lat.seg_ids.shape[0]} and {n_seg} segmentations")
                rows = lat.seg_ids[:, lo:lo + length]
                rows = rows - rows[:, :1]
            else:
                rows = np.broadcast_to(np.arange(length, dtype=np.int64), (n_seg, length))
            seg_rows.append(rows + next_segment[:, None])
            if length:
                next_segment = next_segment + rows[:, -1] + 1
        offset += length
    n_total = len(tokens)
    words = np.concatenate(spans) if spans else np.zeros((0, 2), dtype=np.int64)
    all_spans = np.concatenate([np.repeat(np.arange(n_total, dtype=np.int64)[:, None], 2, axis=1), words])
    all_sources = np.concatenate([np.zeros(n_total, dtype=np.int64)] + sources)
    seg = np.ascontiguousarray(np.concatenate(seg_rows, axis=1)) if n_seg else None
    lattice = Lattice(tuple(tokens), all_spans.astype(np.int32), tuple(tokens) + tuple(texts), all_sources, seg)
    return Packed(tokens, segments, special, lattice, bigrams)


def texts_of_segments(tokens: Sequence[str], special: Sequence[bool], seg_ids: np.ndarray) -> list[list[Optional[str]]]:
    """Per segmentation row of ``seg_ids [S, n]``, the text of each segment (None for the
    segment of a special token)."""
    out = []
    for row in seg_ids:
        starts = np.flatnonzero(np.diff(row, prepend=-1)).tolist()
        bounds = zip(starts, starts[1:] + [len(row)])
        out.append([None if special[s] else "".join(tokens[s:e]) for s, e in bounds])
    return out


def fit_lengths(lengths: list[int], budget: int) -> list[int]:
    """Longest-first truncation of one or two texts to ``budget`` positions in all."""
    if sum(lengths) <= budget:
        return list(lengths)
    if len(lengths) == 1:
        return [budget]
    a, b = lengths
    half = budget // 2
    if a <= half:
        return [a, budget - a]
    if b <= half:
        return [budget - b, b]
    return [budget - half, half]
