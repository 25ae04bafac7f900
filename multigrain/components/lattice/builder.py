"""The ``lattice_builder`` kind and the numpy helpers builders share.

A builder turns a sentence's characters into a ``Lattice``; ``build_many`` is the batched
entry point (override it for speed); ``spec_key()`` is a stable string of everything that
changes its output, used in the lattice cache key.
"""
from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
from typing import Optional, Sequence

import numpy as np

from multigrain.components.lattice.types import Lattice
from multigrain.platform.registry import Registrable

#: bump when a builder's output changes for the same settings (invalidates every cache)
LATTICE_FORMAT_VERSION = 1


class LatticeBuilder(Registrable, kind="lattice_builder"):
    """Characters -> Lattice. Subclasses override ``build`` or ``build_many`` (or both).
    A spec without ``type`` gets the ``lexicon`` builder."""

    default_implementation = "lexicon"

    def build(self, chars: Sequence[str]) -> Lattice:
        return self.build_many([chars])[0]

    def build_many(self, sentences: Sequence[Sequence[str]]) -> list[Lattice]:
        if type(self).build is LatticeBuilder.build:
            raise NotImplementedError(f"{type(self).__name__} must override build or build_many")
        return [self.build(chars) for chars in sentences]

    def spec_key(self) -> str:
        raise NotImplementedError

    @property
    def stage_name(self) -> str:
        """What building lattices is called in progress lines and bars."""
        return f"building lattices ({getattr(self, 'registered_name', type(self).__name__)})"

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({settings})"

    def _spec(self, **settings) -> str:
        name = getattr(self, "registered_name", type(self).__qualname__)
        return json.dumps({"type": name, "v": LATTICE_FORMAT_VERSION, **settings}, sort_keys=True)


_FILE_HASHES: dict[tuple, str] = {}


def file_sha256(path: Optional[str]) -> Optional[str]:
    """sha256 of a file's bytes (memoised per (path, mtime, size, inode)); None for None."""
    if path is None:
        return None
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while creating many small objects (tuples of
    strings, lattices): its generational passes otherwise rescan them all, repeatedly."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def char_offsets(sentences: Sequence[Sequence[str]], sep: str = ""):
    """Join sentences for one string pass.

    Returns ``(text, char_start [N], char_end [N], sent_of_char [N], first_char [B+1])`` where
    N is the total number of characters; ``char_start/char_end`` are each character's
    [start, end) offsets in ``text``; sentences are separated by ``sep``.
    """
    n = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
    first_char = np.zeros(len(sentences) + 1, dtype=np.int64)
    np.cumsum(n, out=first_char[1:])
    joined = ["".join(chars) for chars in sentences]
    code_points = np.fromiter(map(len, joined), dtype=np.int64, count=len(joined))
    text = sep.join(joined)
    lengths = np.ones(int(first_char[-1]), dtype=np.int64)
    # characters of several code points (Latin words kept whole, emoji sequences) are rare:
    # measure them only in the sentences that have some
    for b in np.flatnonzero(code_points != n).tolist():
        lengths[first_char[b] : first_char[b + 1]] = [len(c) for c in sentences[b]]
    sent_of_char = np.repeat(np.arange(len(sentences)), n)
    # every sentence before this character adds len(sep)
    char_end = np.cumsum(lengths) + sent_of_char * len(sep)
    char_start = char_end - lengths
    return text, char_start, char_end, sent_of_char, first_char


def assemble(
    sentences: Sequence[Sequence[str]],
    first_char: np.ndarray,
    word_sent: np.ndarray,
    word_start: np.ndarray,
    word_end: np.ndarray,
    word_text: list,
    word_source: Optional[np.ndarray] = None,
    seg_ids: Optional[list] = None,
) -> list[Lattice]:
    """Lattices from flat word arrays (any order, no duplicates within a sentence).

    ``word_sent/word_start/word_end`` [M]: sentence index and sentence-relative inclusive span of
    each word; ``word_text`` its M strings; ``word_source`` [M] bitmask (default 1);
    ``seg_ids``: per sentence an ``int64 [S, n]`` array or None.
    All lattices share two big read-only arrays (spans, sources); each gets views of them.
    """
    B = len(sentences)
    word_sent = np.asarray(word_sent, dtype=np.int64)
    global_start = first_char[word_sent] + word_start
    # one int64 key orders by (sentence, start, end): global start grows across sentences
    order = np.argsort(global_start * (int(first_char[-1]) + 1) + (word_end - word_start), kind="stable")
    word_sent, word_start, word_end = word_sent[order], word_start[order], word_end[order]
    word_text = np.asarray(word_text, dtype=object)[order].tolist() if len(order) else []
    src = np.ones(len(order), dtype=np.int64) if word_source is None else np.asarray(word_source, np.int64)[order]

    n = np.diff(first_char)
    m = np.bincount(word_sent, minlength=B).astype(np.int64)
    tok = n + m
    first_tok = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(tok, out=first_tok[1:])
    first_word = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(m, out=first_word[1:])

    spans = np.empty((int(first_tok[-1]), 2), dtype=np.int32)
    sources = np.zeros(int(first_tok[-1]), dtype=np.int64)
    char_pos = np.repeat(first_tok[:-1], n) + (np.arange(int(first_char[-1])) - np.repeat(first_char[:-1], n))
    local = char_pos - np.repeat(first_tok[:-1], n)
    spans[char_pos, 0] = local
    spans[char_pos, 1] = local
    word_pos = np.repeat(first_tok[:-1] + n, m) + (np.arange(len(order)) - np.repeat(first_word[:-1], m))
    spans[word_pos, 0] = word_start
    spans[word_pos, 1] = word_end
    sources[word_pos] = src
    spans.flags.writeable = False
    sources.flags.writeable = False

    out = []
    ft, fw = first_tok.tolist(), first_word.tolist()
    with gc_paused():
        for b, chars in enumerate(sentences):
            chars = tuple(chars)
            seg = None if seg_ids is None else seg_ids[b]
            text = chars + tuple(word_text[fw[b] : fw[b + 1]])
            out.append(Lattice(chars, spans[ft[b] : ft[b + 1]], text, sources[ft[b] : ft[b + 1]], seg))
    return out


def partition_seg_ids(boundary_after: np.ndarray) -> np.ndarray:
    """seg_ids row ``[n]`` from a bool ``[n]`` "a segment ends after character t" flag."""
    seg = np.zeros(len(boundary_after), dtype=np.int64)
    if len(boundary_after) > 1:
        np.cumsum(boundary_after[:-1], out=seg[1:])
    return seg


def partition_words(seg: np.ndarray, min_length: int = 2):
    """(start, end) inclusive character spans of a partition's segments of >= min_length chars."""
    n = len(seg)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    is_start = np.ones(n, dtype=bool)
    is_start[1:] = seg[1:] != seg[:-1]
    starts = np.flatnonzero(is_start)
    ends = np.append(starts[1:] - 1, n - 1)
    keep = ends - starts + 1 >= min_length
    return starts[keep], ends[keep]
