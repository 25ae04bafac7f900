"""Shared helpers of the readers: strict UTF-8 line reading, character splitting, stable splits."""
from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Iterator

from multigrain.platform.errors import DataError

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


def utf8_error(path: str, error: UnicodeDecodeError) -> DataError:
    """The DataError for a file that is not valid UTF-8, naming the line of the first bad byte.

    The decoder's own error only knows its offset within a buffered chunk, so the file is
    decoded again from its bytes to find the offset in the file.
    """
    raw = Path(path).read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        error = e
    start, bad = error.start, error.object[error.start:error.end]
    line = raw.count(b"\n", 0, start) + 1
    return DataError(path, line, f"not valid UTF-8 (byte {bad[:4]!r} at byte offset {start})")


def read_text(path: str) -> str:
    """The whole file as text (UTF-8, strict, a leading byte-order mark removed)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise utf8_error(path, e) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """``(line number, line without its end-of-line)`` for each line, lazily; 1-based.

    Strict UTF-8: a bad byte becomes ``DataError(path, line, "not valid UTF-8 ...")``.
    A byte-order mark at the start of the file is dropped. Universal newlines (CRLF reads as LF).
    """
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if line.endswith("\n"):
                    line = line[:-1]
                if number == 1 and line.startswith("\ufeff"):
                    line = line[1:]
                yield number, line
    except UnicodeDecodeError as e:
        raise utf8_error(path, e) from None


def stable_bucket(key: str, buckets: int = 1000) -> int:
    """A hash of ``key`` that is the same in every process and Python version (crc32 of UTF-8)."""
    return zlib.crc32(key.encode("utf-8")) % buckets


def in_fraction(key: str, low: float, high: float) -> bool:
    """Whether ``key``'s stable bucket (0..999) falls in ``[low*1000, high*1000)``."""
    bucket = stable_bucket(key)
    return low * 1000 <= bucket < high * 1000


def shorten(text: str, limit: int = 60) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters, for error messages."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
