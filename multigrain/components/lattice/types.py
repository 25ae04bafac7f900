"""The lattice of one sentence (``Lattice``) and of a padded batch (``LatticeBatch``).

Token order inside a lattice: the ``n`` characters first (token ``i`` is character ``i`` with span
``(i, i)``), then the ``m`` words sorted by ``(start, end)``; ``T = n + m``. Spans are inclusive
character indices. The same order holds in every row of a ``LatticeBatch``: characters at
positions ``0..n_b-1``, words from ``n_b`` on, padding last.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

#: token id written at padding positions of ``LatticeBatch.token_ids`` (vocabularies reserve 0)
PAD_TOKEN_ID = 0
#: value of ``LatticeBatch.seg_ids`` at character positions past a row's last character
SEG_PAD = -1


def _frozen(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False, slots=True)
class Lattice:
    """One sentence.

    - ``chars``: the characters (a "character" may be a multi-code-point token, e.g. ``"Apple"``
      kept whole by a reader, or an emoji); ``len(chars)`` equals the sentence's label count.
    - ``spans``: ``int32 [T, 2]`` inclusive (start, end) character indices; rows ``0..n-1`` are
      ``(i, i)``, then the words sorted by (start, end), no duplicates.
    - ``token_text``: ``T`` strings, the characters then each word's text.
    - ``sources``: ``int64 [T]``; bit k set when builder k (of a ``union``) proposed the word;
      a single builder marks its words 1; characters are 0.
    - ``seg_ids``: optional ``int64 [S, n]``: the 0-based word index of each character under
      segmentation s (non-decreasing, starts at 0, steps of at most 1).

    Arrays are read-only. Build with the fields directly (no validation, so that cached
    re-reads stay fast); ``validate()`` checks every invariant.
    """

    chars: tuple[str, ...]
    spans: np.ndarray
    token_text: tuple[str, ...]
    sources: np.ndarray
    seg_ids: Optional[np.ndarray] = None

    def __post_init__(self):
        object.__setattr__(self, "spans", _frozen(self.spans))
        object.__setattr__(self, "sources", _frozen(self.sources))
        if self.seg_ids is not None:
            object.__setattr__(self, "seg_ids", _frozen(self.seg_ids))

    def __reduce__(self):  # unpickle through __init__, so that the arrays are read-only again
        return (Lattice, (self.chars, self.spans, self.token_text, self.sources, self.seg_ids))

    @classmethod
    def from_words(
        cls,
        chars: Sequence[str],
        words: Sequence[tuple[int, int]] = (),
        sources: Optional[Sequence[int]] = None,
        seg_ids: Optional[np.ndarray] = None,
    ) -> "Lattice":
        """Lattice from characters and word spans in any order (duplicates merged, sources OR-ed)."""
        chars = tuple(chars)
        n = len(chars)
        merged: dict[tuple[int, int], int] = {}
        for k, (s, e) in enumerate(words):
            src = 1 if sources is None else int(sources[k])
            merged[(int(s), int(e))] = merged.get((int(s), int(e)), 0) | src
        keys = sorted(merged)
        spans = np.empty((n + len(keys), 2), dtype=np.int32)
        spans[:n, 0] = spans[:n, 1] = np.arange(n)
        if keys:
            spans[n:] = np.asarray(keys, dtype=np.int32)
        src = np.zeros(n + len(keys), dtype=np.int64)
        src[n:] = [merged[k] for k in keys]
        text = chars + tuple("".join(chars[s : e + 1]) for s, e in keys)
        seg = None
        if seg_ids is not None:
            seg = np.asarray(seg_ids, dtype=np.int64)
            seg = seg.reshape(1, n) if seg.ndim == 1 else seg
        lattice = cls(chars, spans, text, src, seg)
        lattice.validate()
        return lattice

    @property
    def n_chars(self) -> int:
        return len(self.chars)

    @property
    def n_words(self) -> int:
        return len(self.token_text) - len(self.chars)

    @property
    def n_tokens(self) -> int:
        return len(self.token_text)

    def words(self) -> list[tuple[int, int, str]]:
        """``[(start, end, text)]`` of the word tokens, in lattice order."""
        n = self.n_chars
        return [(int(s), int(e), t) for (s, e), t in zip(self.spans[n:].tolist(), self.token_text[n:])]

    def piece(self, start: int, end: int) -> "Lattice":
        """The lattice of characters ``start .. end - 1``: the words inside them, positions
        shifted to start at 0 (words crossing a bound are dropped)."""
        n = self.n_chars
        words = self.spans[n:].astype(np.int64)
        inside = np.flatnonzero((words[:, 0] >= start) & (words[:, 1] < end)) + n
        spans = np.concatenate([np.repeat(np.arange(end - start, dtype=np.int32)[:, None], 2, 1),
                                (self.spans[inside] - start).astype(np.int32)])
        text = self.chars[start:end] + tuple(self.token_text[i] for i in inside.tolist())
        sources = np.concatenate([np.zeros(end - start, dtype=np.int64), self.sources[inside]])
        seg = None
        if self.seg_ids is not None:
            seg = self.seg_ids[:, start:end]
            seg = seg - seg[:, :1] if end > start else seg
        return Lattice(self.chars[start:end], spans, text, sources, seg)

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first broken invariant."""
        n, T = self.n_chars, self.n_tokens
        sp = self.spans
        if sp.shape != (T, 2) or sp.dtype != np.int32:
            raise ValueError(f"spans must be int32 [{T}, 2], got {sp.dtype} {sp.shape}")
        if self.sources.shape != (T,) or self.sources.dtype != np.int64:
            raise ValueError(f"sources must be int64 [{T}], got {self.sources.dtype} {self.sources.shape}")
        if not (np.array_equal(sp[:n, 0], np.arange(n)) and np.array_equal(sp[:n, 1], np.arange(n))):
            raise ValueError("the first n tokens must be the characters, spans (i, i)")
        if np.any(self.sources[:n] != 0):
            raise ValueError("characters must have source 0")
        w = sp[n:].astype(np.int64)
        if len(w):
            if w.min() < 0 or w.max() >= n or np.any(w[:, 0] > w[:, 1]):
                raise ValueError("word spans must satisfy 0 <= start <= end < n")
            key = w[:, 0] * (n + 1) + w[:, 1]
            if np.any(np.diff(key) <= 0):
                raise ValueError("words must be sorted by (start, end) without duplicates")
        for (s, e), t in zip(w.tolist(), self.token_text[n:]):
            if t != "".join(self.chars[s : e + 1]):
                raise ValueError(f"word text {t!r} does not match its span ({s}, {e})")
        if tuple(self.token_text[:n]) != self.chars:
            raise ValueError("token_text must start with the characters")
        if self.seg_ids is not None:
            seg = self.seg_ids
            if seg.ndim != 2 or seg.shape[1] != n or seg.dtype != np.int64:
                raise ValueError(f"seg_ids must be int64 [S, {n}], got {seg.dtype} {seg.shape}")
            if n and (np.any(seg[:, 0] != 0) or np.any(np.diff(seg, axis=1) < 0) or np.any(np.diff(seg, axis=1) > 1)):
                raise ValueError("seg_ids rows must start at 0 and increase by 0 or 1")

    def __eq__(self, other) -> bool:
        if not isinstance(other, Lattice):
            return NotImplemented
        same_seg = (self.seg_ids is None and other.seg_ids is None) or (
            self.seg_ids is not None and other.seg_ids is not None and np.array_equal(self.seg_ids, other.seg_ids)
        )
        return (
            self.chars == other.chars
            and self.token_text == other.token_text
            and np.array_equal(self.spans, other.spans)
            and np.array_equal(self.sources, other.sources)
            and same_seg
        )

    __hash__ = None  # arrays inside: not hashable


@dataclass
class LatticeBatch:
    """A padded batch of lattices, B rows of T = max tokens positions.

    - ``token_ids``  ``[B, T]`` long: ``token_to_id(text, is_char)``; ``PAD_TOKEN_ID`` (0) at padding.
    - ``starts``, ``ends`` ``[B, T]`` long: inclusive character span; 0 at padding.
    - ``is_char`` ``[B, T]`` bool: position < n_b.
    - ``mask`` ``[B, T]`` bool: position < T_b (real token).
    - ``n_chars`` ``[B]`` long.
    - ``seg_ids`` ``[B, S, n_max]`` long or None: segment (word) index of each character under
      segmentation s; ``SEG_PAD`` (-1) past a row's last character. None when no lattice has them.
    - ``sources`` ``[B, T]`` long: builder bitmask (0 for characters and padding).
    - ``max_chars``: n_max = max n_b as a Python int (so ``char_mask`` needs no device sync).
    - ``max_words``, ``longest_word``, ``longest_segment``: the most word tokens of a row, the most
      characters of a word token, of a segment of ``seg_ids`` (0 when there is none), as Python ints
      counted while collating, so encoders size their tensors without reading the device; None in a
      batch made otherwise (the encoders then count on the device).
    """

    token_ids: torch.Tensor
    starts: torch.Tensor
    ends: torch.Tensor
    is_char: torch.Tensor
    mask: torch.Tensor
    n_chars: torch.Tensor
    sources: torch.Tensor
    max_chars: int
    seg_ids: Optional[torch.Tensor] = None
    max_words: Optional[int] = None
    longest_word: Optional[int] = None
    longest_segment: Optional[int] = None

    @property
    def char_mask(self) -> torch.Tensor:
        """``[B, n_max]`` bool: real characters (the first n_max token positions)."""
        return self.is_char[:, : self.max_chars]

    @property
    def word_mask(self) -> torch.Tensor:
        """``[B, T]`` bool: real word tokens."""
        return self.mask & ~self.is_char

    def to(self, device, non_blocking: bool = False) -> "LatticeBatch":
        moved = {
            f.name: (v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v)
            for f in dataclasses.fields(self)
            for v in [getattr(self, f.name)]
        }
        return LatticeBatch(**moved)

    def pin_memory(self) -> "LatticeBatch":
        return LatticeBatch(
            **{
                f.name: (v.pin_memory() if isinstance(v, torch.Tensor) else v)
                for f in dataclasses.fields(self)
                for v in [getattr(self, f.name)]
            }
        )

    @classmethod
    def collate(cls, lattices: Sequence[Lattice], token_to_id: Callable[[str, bool], int]) -> "LatticeBatch":
        """Pad ``lattices`` into one batch; ``token_to_id(text, is_char)`` maps each token to an id.

        All lattices must agree on having ``seg_ids`` (and on S) or all lack them.
        """
        if not lattices:
            raise ValueError("cannot collate an empty list of lattices")
        B = len(lattices)
        n = np.fromiter((lat.n_chars for lat in lattices), dtype=np.int64, count=B)
        t = np.fromiter((lat.n_tokens for lat in lattices), dtype=np.int64, count=B)
        T, n_max = int(t.max()), int(n.max())
        row = np.repeat(np.arange(B), t)
        col = np.arange(int(t.sum())) - np.repeat(np.cumsum(t) - t, t)
        spans = np.concatenate([lat.spans for lat in lattices]).astype(np.int64)
        is_char_flat = col < np.repeat(n, t)
        ids = [
            token_to_id(text, c)
            for lat, nb in zip(lattices, n.tolist())
            for text, c in zip(lat.token_text, [True] * nb + [False] * (lat.n_tokens - nb))
        ]

        def padded(values, dtype, fill):
            out = np.full((B, T), fill, dtype=dtype)
            out[row, col] = values
            return torch.from_numpy(out)

        has_seg = [lat.seg_ids is not None for lat in lattices]
        seg = None
        if any(has_seg):
            if not all(has_seg):
                raise ValueError("some lattices of the batch have seg_ids and some do not")
            S = {lat.seg_ids.shape[0] for lat in lattices}
            if len(S) != 1:
                raise ValueError(f"lattices of the batch have different numbers of segmentations: {sorted(S)}")
            seg_np = np.full((B, S.pop(), n_max), SEG_PAD, dtype=np.int64)
            for b, lat in enumerate(lattices):
                seg_np[b, :, : lat.n_chars] = lat.seg_ids
            seg = torch.from_numpy(seg_np)

        return cls(
            token_ids=padded(np.asarray(ids, dtype=np.int64), np.int64, PAD_TOKEN_ID),
            starts=padded(spans[:, 0], np.int64, 0),
            ends=padded(spans[:, 1], np.int64, 0),
            is_char=padded(is_char_flat, np.bool_, False),
            mask=padded(True, np.bool_, False),
            n_chars=torch.from_numpy(n),
            sources=padded(np.concatenate([lat.sources for lat in lattices]), np.int64, 0),
            max_chars=n_max,
            seg_ids=seg,
            max_words=int((t - n).max()),
            longest_word=int(np.diff(spans[~is_char_flat], axis=1).max(initial=-1)) + 1,
            longest_segment=max(_longest_run(lat.seg_ids) for lat in lattices) if seg is not None else None,
        )


def _longest_run(seg_ids: np.ndarray) -> int:
    """The longest run of equal ids in any row of ``seg_ids [S, n]`` (a segment's length); 0 if n is 0."""
    if seg_ids.size == 0:
        return 0
    S, n = seg_ids.shape
    change = np.ones((S, n + 1), dtype=bool)
    change[:, 1:n] = seg_ids[:, 1:] != seg_ids[:, :-1]
    edges = np.flatnonzero(change.ravel())  # run boundaries, row ends included (each row is n + 1 wide)
    gaps = np.diff(edges)
    return int(gaps[edges[:-1] % (n + 1) != n].max(initial=0))
