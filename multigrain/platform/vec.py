"""The word2vec/fastText text format (``.vec``): one token and its numbers a line, after an
optional ``count dim`` header line. The one parser of it: the vocabulary reads its tokens, the
components their vectors."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from multigrain.platform.digits import whole_number


def is_vec_header(fields: list[str]) -> bool:
    """Whether the fields of a file's first line are a ``count dim`` header."""
    return len(fields) == 2 and all(whole_number(f) is not None for f in fields)


def vec_rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, [token, number, ...]) of every vector line; the header and lines
    without numbers are skipped."""
    from multigrain.platform.data import read_lines

    for n, line in read_lines(str(path)):  # UTF-8, no NUL, bounded lines: a DataError naming the line
        fields = line.rstrip(" ").split(" ")
        if (n == 1 and is_vec_header(fields)) or len(fields) < 2:
            continue
        yield n, fields
