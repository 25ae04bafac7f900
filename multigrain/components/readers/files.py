"""What the readers share about their files: strict UTF-8 reading with the line and column of a bad
byte (``read_lines``, defined in ``multigrain.platform.data`` for ``predict`` inputs too), JSON lines
through ``jsonio.loads`` (no deep nesting, no lone surrogate), splits chosen by a stable hash of an
example, and quoting text in error messages (``shorten``: a few offending characters, never a line).

What a text file may hold (every reader): no NUL character (a NUL means a binary or damaged file),
and no line longer than ``MAX_LINE_CHARS`` characters (bounded memory and vocabularies). Other
control characters in free text are read as they are (BQ's training file holds backspaces);
character columns (``readers/ner.py``) refuse them."""
from __future__ import annotations

from typing import Iterator

from multigrain.components.text import stable_bucket  # noqa: F401 (readers' splits; defined beside the tokens)
from multigrain.platform.data import MAX_LINE_CHARS, json_lines, read_lines, utf8_error
from multigrain.platform.errors import DataError

__all__ = ["MAX_LINE_CHARS", "read_lines", "read_text", "read_json_objects", "read_csv_rows", "utf8_error",
           "shorten", "stable_bucket", "in_fraction"]


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


def in_fraction(key: str, low: float, high: float) -> bool:
    """Whether ``key``'s stable bucket (0..999) falls in ``[low*1000, high*1000)``."""
    bucket = stable_bucket(key)
    return low * 1000 <= bucket < high * 1000


def shorten(text: str, limit: int = 30) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters, for error messages: an offending token or
    value, never a whole line (a message names the line by its number)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def read_json_objects(path: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of a JSON-lines file; a line that is no
    JSON, or JSON but not an object, is a DataError naming the line."""
    return json_lines(path)


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
