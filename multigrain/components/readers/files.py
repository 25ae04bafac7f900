"""What the readers share about their files: strict UTF-8 reading with the line of a bad byte,
splits chosen by a stable hash of an example, and quoting text in error messages.

What a text file may hold (every reader): no NUL character (a NUL means a binary or damaged file),
and no line longer than ``MAX_LINE_CHARS`` characters (bounded memory and vocabularies). Other
control characters in free text are read as they are (BQ's training file holds backspaces);
character columns (``readers/ner.py``) refuse them."""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Iterator

from multigrain.platform.data import json_objects
from multigrain.platform.errors import DataError

#: the longest line a line-based reader accepts (a sentence, a title, a pair, a TSV row)
MAX_LINE_CHARS = 1_000_000


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
    text = text[1:] if text.startswith("\ufeff") else text
    nul = text.find("\0")
    if nul >= 0:
        raise DataError(path, text.count("\n", 0, nul) + 1, "a NUL character: not a text file")
    return text


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
                if "\0" in line:
                    raise DataError(path, number, f"a NUL character at column {line.index(chr(0)) + 1}: not a text file")
                if len(line) > MAX_LINE_CHARS:
                    raise DataError(path, number, f"a line of {len(line):,} characters; the longest a reader accepts "
                                                  f"is {MAX_LINE_CHARS:,}")
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


def read_json_objects(path: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of a JSON-lines file; a line that is no
    JSON, or JSON but not an object, is a DataError naming the line."""
    return json_objects(path, read_lines(path))


def read_csv_rows(path: str, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """``(line number of the row's first line, fields)`` for every row of an RFC 4180 CSV file
    (quoted fields may span lines; a leading BOM is dropped): bad quoting, a NUL character or
    a byte that is not UTF-8 is a DataError naming the line."""
    import csv

    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            rows = csv.reader(f, delimiter=delimiter, strict=True)
            end = 0
            try:
                for row in rows:
                    number, end = end + 1, rows.line_num
                    if any("\0" in field for field in row):
                        raise DataError(path, number, "a NUL character: not a text file")
                    yield number, row
            except csv.Error as e:
                raise DataError(path, rows.line_num, f"bad CSV: {e}") from None
    except UnicodeDecodeError as e:
        raise utf8_error(path, e) from None
