"""Instances: one example as a dict of named fields, remembering where it was read from."""
from __future__ import annotations

from typing import Any


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
