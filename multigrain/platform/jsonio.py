"""JSON from files a user hands us (predict inputs, JSON-lines data, SQuAD documents, leaderboard
exports), parsed so that hostile text is one clear message and never a traceback:

- nesting deeper than ``MAX_DEPTH`` (``[[[[...`` 100,000 deep makes Python's decoder raise
  RecursionError) is refused before decoding;
- a lone surrogate (``"\\ud800"``: valid JSON, but no Unicode text, and it breaks every later UTF-8
  write) is refused with the place it occurs;
- an integer longer than Python converts (``sys.get_int_max_str_digits()``: a plain ValueError from
  the decoder, no JSONDecodeError) is refused as such.

``loads`` raises ``JsonTextError`` (a ValueError) with a message that names no file; callers add
the file and line (``DataError(path, line, str(e))``)."""
from __future__ import annotations

import json
import re
import sys
from typing import Any

#: deeper JSON than this is refused: no data or export this platform reads nests beyond ~6 levels
MAX_DEPTH = 200

_OPENERS = re.compile(r'[\[{"\\]|[\]}]')
_SURROGATE = re.compile("[\ud800-\udfff]")
#: the JSON escape of a surrogate (\uD800 to \uDFFF): only text holding one, or a surrogate, is walked
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_STRING_OR_DIGITS = re.compile(r'"(?:[^"\\]|\\.)*"|([0-9]+)')


class JsonTextError(ValueError):
    """The text is no usable JSON; the message says why and where (column) without quoting it."""


def nesting_depth(text: str, limit: int = MAX_DEPTH) -> int:
    """The deepest ``[``/``{`` nesting of ``text`` outside strings, counting up to ``limit + 1``
    (a linear scan with no recursion; the text need not be valid JSON)."""
    depth = deepest = 0
    in_string = False
    escaped_at = -1  # the position of the character a backslash escapes
    for match in _OPENERS.finditer(text):
        ch = match.group()
        if in_string:
            if match.start() == escaped_at:
                continue
            if ch == "\\":
                escaped_at = match.end()
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _first_surrogate(value: Any) -> str | None:
    """The JSON path (``$.a[3]``) of the first string or key holding a lone surrogate, else None."""
    todo = [("$", value)]
    while todo:
        where, node = todo.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return where
        elif isinstance(node, dict):
            for key, item in node.items():
                if _SURROGATE.search(key):
                    return f"{where} (a key)"
                todo.append((f"{where}.{key}", item))
        elif isinstance(node, list):
            todo.extend((f"{where}[{i}]", item) for i, item in enumerate(node))
    return None


def too_long_number() -> str:
    """Why ``json.loads`` raised a plain ValueError: an integer of more digits than Python converts."""
    return f"a number of more than {sys.get_int_max_str_digits():,} digits (too long to read as a number)"


def too_long_number_line(text: str) -> int | None:
    """The line of the first integer in the JSON ``text`` longer than Python converts (outside strings)."""
    limit = sys.get_int_max_str_digits()
    for match in _STRING_OR_DIGITS.finditer(text):
        if match.group(1) and len(match.group(1)) > limit:
            return text.count("\n", 0, match.start()) + 1
    return None


def check_text(text: str) -> None:
    """Refuse a lone surrogate in ``text`` (a line read with ``surrogateescape`` or built by code)."""
    match = _SURROGATE.search(text)
    if match:
        raise JsonTextError(f"a lone surrogate U+{ord(match.group()):04X} at column {match.start() + 1} "
                            f"(no valid Unicode text)")


def loads(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for untrusted text: refuses nesting deeper than ``max_depth``, a lone surrogate
    anywhere in a string or key, and bad JSON, each as a ``JsonTextError``."""
    if nesting_depth(text, max_depth) > max_depth:
        raise JsonTextError(f"nested deeper than {max_depth} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise JsonTextError(f"bad JSON: {e.msg} (column {e.colno})") from None
    except RecursionError:  # a limit lower than ours (a small recursion limit in this process)
        raise JsonTextError("nested too deeply to read") from None
    except ValueError:
        raise JsonTextError(too_long_number()) from None
    # the walk costs seconds on a file of millions of values; text without a surrogate cannot hold one
    where = _first_surrogate(value) if _SURROGATE.search(text) or _SURROGATE_ESCAPE.search(text) else None
    if where is not None:
        raise JsonTextError(f"a lone surrogate (\\ud800-\\udfff) in the string at {where} (no valid Unicode text)")
    return value


def read_object(path, damaged: str, expected: str = "") -> dict:
    """The JSON object in the file ``path`` (one a run or another machine wrote): an unreadable file,
    bad or too deeply nested JSON, or a value that is no object is a ConfigurationError,
    ``{path}: {damaged} ({why})`` (``expected``: added after the kind of value found instead)."""
    from pathlib import Path

    from multigrain.platform.errors import ConfigurationError

    try:
        value = loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigurationError(f"{path}: cannot read it ({e.strerror or e})") from None
    except ValueError as e:  # a JsonTextError, or a UnicodeDecodeError
        raise ConfigurationError(f"{path}: {damaged} ({e})") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"{path}: {damaged} (holds a {type(value).__name__}{expected})")
    return value
