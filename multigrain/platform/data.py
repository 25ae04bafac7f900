"""Instances: one example as a dict of named fields, remembering where it was read from; JSON-lines
objects with their line numbers (readers and ``predict`` inputs)."""
from __future__ import annotations

import json
from typing import Any, Iterable, Iterator


class Instance(dict):
    """Fields of one example (``chars``, ``tags``, ``label``, ``lattice``...).

    ``source`` is ``(path, line)`` of the example's first line (1-based), so that any later
    error about this example can name where it came from.
    """

    __slots__ = ("source",)

    def __init__(self, fields: dict[str, Any] | None = None, source: tuple[str, int] | None = None, **kw):
        super().__init__(fields or {}, **kw)
        self.source = source

    def where(self) -> str:
        return f"{self.source[0]}:{self.source[1]}" if self.source else "<memory>"

    def __reduce__(self):  # keep `source` through pickling (Ray, caches)
        return (self.__class__, (dict(self), self.source))


def json_objects(path: str, lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for every non-blank line of ``lines`` (``(number, text)`` pairs of
    the JSON-lines file ``path``); a line that is no JSON, or JSON but not an object, is a
    DataError naming the line."""
    from multigrain.platform.errors import DataError

    for number, line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(path, number, f"bad JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(record, dict):
            raise DataError(path, number, f"expected a JSON object, found {type(record).__name__}")
        yield number, record
