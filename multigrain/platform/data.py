"""Instances: one example as a dict of named fields, remembering where it was read from; the lines
of a user's text file (strict UTF-8, a bad byte named by line and column) and JSON-lines objects
with their line numbers (readers and ``predict`` inputs).

What a text file may hold (every reader, every ``predict`` input): valid UTF-8 (a leading
byte-order mark is dropped), no NUL character (a NUL means a binary or damaged file), and no line
longer than ``MAX_LINE_CHARS`` characters (bounded memory and vocabularies). A JSON line is parsed
by ``jsonio.loads``: no nesting deeper than ``jsonio.MAX_DEPTH``, no lone surrogate. Errors name the
file, the line and at most a few offending characters, never the line itself (a file the user did
not mean to show, ``/etc/passwd`` as a data path, stays unprinted)."""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

#: the longest line a line-based reader accepts (a sentence, a title, a pair, a TSV row)
MAX_LINE_CHARS = 1_000_000
#: the most bytes of one line held while reading it (UTF-8: at most 4 bytes a character)
MAX_LINE_BYTES = 4 * MAX_LINE_CHARS + 2


class Instance(dict):
    """Fields of one example (``chars``, ``tags``, ``label``, ``lattice``...).

    ``source`` is ``(path, line)`` of the example's first line (1-based), so that any later
    error about this example can name where it came from.

    ``remember(owner, value)`` keeps one value derived from the fields with the example, for the
    ``owner`` that derived it (``memo(owner)`` gives it back, None for any other owner): what a model
    would otherwise compute again at every epoch, such as the example's ids under its own
    vocabulary, so a model passes a token of its own as ``owner``. The fields must not change
    afterwards; pickling leaves the value behind.
    """

    __slots__ = ("source", "_memo")

    def __init__(self, fields: dict[str, Any] | None = None, source: tuple[str, int] | None = None, **kw):
        super().__init__(fields or {}, **kw)
        self.source = source
        self._memo: Optional[tuple[object, Any]] = None

    def memo(self, owner: object) -> Any:
        memo = self._memo
        return memo[1] if memo is not None and memo[0] is owner else None

    def remember(self, owner: object, value: Any) -> None:
        self._memo = (owner, value)

    def where(self) -> str:
        return f"{self.source[0]}:{self.source[1]}" if self.source else "<memory>"

    def __reduce__(self):  # keep `source` through pickling (Ray, caches)
        return (self.__class__, (dict(self), self.source))


def decoded_lines(path: str) -> Iterator[tuple[int, str]]:
    """``(line number, line without its end-of-line)`` of a UTF-8 file, lazily, 1-based: universal
    newlines (``\\r\\n`` and a lone ``\\r`` end a line, as in Python's text mode), a leading
    byte-order mark dropped. A byte that is no UTF-8 is ``DataError(path, line, "not valid UTF-8
    (byte b'\\xff' at column 7)")``, found as the file is read (no second pass)."""
    number = 0
    with open(path, "rb") as f:
        for raw in bounded_raw_lines(f, path, MAX_LINE_BYTES):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _not_utf8(path, number, raw, e) from None
            if number == 0 and text.startswith("\ufeff"):
                text = text[1:]
            if text.endswith("\n"):
                text = text[:-1]
            if text.endswith("\r"):
                text = text[:-1]
            for line in text.split("\r") if "\r" in text else (text,):
                number += 1
                yield number, line


def bounded_raw_lines(f, path: str, limit: int) -> Iterator[bytes]:
    """The lines of the binary file ``f``, each with its end (``\\n``, ``\\r\\n`` or a lone ``\\r``),
    never holding more than ``limit`` bytes of one line: a longer line is a DataError raised after
    ``limit`` bytes, not after the whole line (a 1.5 GB file of one line took 3 GB and 20 s, and
    Ctrl-C waited for the read)."""
    from multigrain.platform.errors import DataError

    held, number = b"", 0
    while block := f.read(1 << 20):
        held += block
        # up to the last LF, or the last CR not at the end (it may be the first half of a CR LF)
        end = max(held.rfind(b"\n"), held.rfind(b"\r", 0, len(held) - 1))
        if end >= 0:
            lines = held[:end + 1].splitlines(keepends=True)
            held = held[end + 1:]
            number += len(lines)
            yield from lines
        if len(held) > limit:
            problem = "a NUL character: not a text file" if b"\0" in held else \
                f"a line of more than {MAX_LINE_CHARS:,} characters, the longest a reader accepts"
            raise DataError(path, number + 1, problem)
    if held:
        yield from held.splitlines(keepends=True)


def _not_utf8(path: str, before: int, raw: bytes, error: UnicodeDecodeError):
    """The DataError of the first bad byte of ``raw``, the physical line after line ``before``."""
    from multigrain.platform.errors import DataError

    head = raw[:error.start]
    line = before + 1 + head.count(b"\r")  # a lone CR ends a line too
    head = head.rpartition(b"\r")[2]
    if before == 0 and line == 1 and head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    column = len(head.decode("utf-8")) + 1
    bad = raw[error.start:error.end][:4]
    return DataError(path, line, f"not valid UTF-8 (byte {bad!r} at column {column})")


def utf8_error(path: str, error: UnicodeDecodeError | None = None):
    """The DataError naming the line and column of the first byte of ``path`` that is no UTF-8
    (``error``, a decoder's error, only knows an offset in a buffered chunk)."""
    from multigrain.platform.errors import DataError

    try:
        for _ in decoded_lines(path):
            pass
    except DataError as e:
        return e
    return DataError(path, None, f"not valid UTF-8 ({error.reason if error else 'no byte found'})")


def read_lines(path: str) -> Iterator[tuple[int, str]]:
    """``decoded_lines`` of a text file, refusing a NUL character and a line longer than
    ``MAX_LINE_CHARS``, each a DataError naming the line."""
    from multigrain.platform.errors import DataError

    for number, line in decoded_lines(path):
        if "\0" in line:
            raise DataError(path, number, f"a NUL character at column {line.index(chr(0)) + 1}: not a text file")
        if len(line) > MAX_LINE_CHARS:
            raise DataError(path, number, f"a line of {len(line):,} characters; the longest a reader accepts "
                                          f"is {MAX_LINE_CHARS:,}")
        yield number, line


def json_objects(path: str, lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of ``lines`` (``(number, text)`` pairs of
    the JSON-lines file ``path``); a line that is no JSON (``jsonio.loads``: too deep, a lone
    surrogate, bad syntax), or JSON but not an object, is a DataError naming the line."""
    from multigrain.platform.errors import DataError
    from multigrain.platform.jsonio import JsonTextError, check_text, loads

    for number, line in lines:
        if not line.strip():
            continue
        try:
            check_text(line)  # a lone surrogate in the text itself (lines given by code)
            record = loads(line)
        except JsonTextError as e:
            raise DataError(path, number, str(e)) from None
        if not isinstance(record, dict):
            raise DataError(path, number, f"expected a JSON object, found {type(record).__name__}")
        yield number, record


def json_lines(path: str) -> Iterator[tuple[int, dict]]:
    """``json_objects`` of the JSON-lines file ``path`` read by ``read_lines``."""
    return json_objects(path, read_lines(path))
