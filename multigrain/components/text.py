"""How a text becomes tokens and bigrams, the same for the readers that make instances and the
models that make instances from ``predict`` input or count their vocabularies; and the stable
hash of a text (``stable_bucket``) that readers split data by and models draw from."""
from __future__ import annotations

import re
import zlib
from typing import Sequence

#: what the last character of a text is paired with in its bigram
BIGRAM_END = "</s>"

_LATIN = re.compile(r"[A-Za-z0-9]")
_LATIN_RUN_OR_CHAR = re.compile(r"[A-Za-z0-9]+|.", re.S)


def split_chars(text: str, keep_latin_words: bool = True) -> list[str]:
    """The tokens of ``text``: one per code point, or with ``keep_latin_words`` every run of
    ASCII letters/digits as one token. Nothing is dropped: ``''.join(tokens) == text``.

    Python strings hold code points, so an astral character (emoji) is never split in two;
    full-width forms (``Ａ``, ``１``) are not ASCII and stay single tokens.
    """
    if keep_latin_words and _LATIN.search(text):
        return _LATIN_RUN_OR_CHAR.findall(text)
    return list(text)


def token_starts(tokens: list[str]) -> list[int]:
    """Character offset (in ``''.join(tokens)``) where each token starts, e.g. to map an MRC
    ``answer_start`` to a token index with ``bisect_right(starts, answer_start) - 1``."""
    starts, at = [], 0
    for token in tokens:
        starts.append(at)
        at += len(token)
    return starts


def bigrams_of(chars: Sequence[str]) -> list[str]:
    """Forward bigrams ``c_i c_{i+1}``, the last one paired with ``BIGRAM_END``."""
    chars = list(chars)
    return [a + b for a, b in zip(chars, chars[1:] + [BIGRAM_END])]


SENTENCE_END = re.compile(r"[。！？!?；;]")


def piece_bounds(chars: Sequence[str], limit: int) -> list[tuple[int, int]]:
    """``[(start, end)]`` cutting ``chars`` into consecutive pieces of at most ``limit``: each
    piece ends after the last sentence end (。！？!?；;) of its window when there is one (past
    the window's first character), else at the window."""
    bounds, start, n = [], 0, len(chars)
    while n - start > limit:
        ends = [i for i in range(start + 1, start + limit) if SENTENCE_END.fullmatch(chars[i])]
        cut = ends[-1] + 1 if ends else start + limit
        bounds.append((start, cut))
        start = cut
    if start < n:
        bounds.append((start, n))
    return bounds


def stable_bucket(key: str, buckets: int = 1000) -> int:
    """A hash of ``key`` that is the same in every process and Python version (crc32 of UTF-8)."""
    return zlib.crc32(key.encode("utf-8")) % buckets
