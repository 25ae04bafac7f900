"""What may enter the tracking store: experiment names, metric/param/tag keys, numbers, and the
paths artifacts are written to. Imports nothing heavy (no MLflow): specs, the portable
leaderboard file and ``multigrain log`` check their input here before anything is written.

- An experiment name is ``<task>/<dataset>``, each a *safe segment*: ASCII letters, digits, ``_``,
  ``-`` and ``.``, at most ``SEGMENT_MAX`` characters, and not ``.`` or ``..``. Experiment names
  become folders (``<store folder>/mlruns/<task>/<dataset>``), so nothing else may climb out of
  the store or name a surprising path.
- A metric, param or tag key is what MLflow accepts (its rule, mirrored so that a whole file is
  checked before the first write): letters (Unicode ``\\w``), digits, ``_ - . / : `` and spaces, at
  most 250 characters, and unchanged by path normalisation (no ``..``, ``./``, leading ``/``, ``//``).
- A number is a finite float (a whole number too large for one is refused, not an
  OverflowError); steps and times are 64-bit whole numbers.
"""
from __future__ import annotations

import json
import math
import posixpath
import re
from pathlib import Path
from typing import Any, Optional

SEGMENT_MAX = 100
_SEGMENT = re.compile(r"[A-Za-z0-9_.\-]+")
#: MLflow's metric/param/tag name characters (POSIX): slashes, word characters, ``.``, ``-``, space, ``:``
_KEY = re.compile(r"[/\w.\- :]+")
KEY_MAX = 250  # MLflow's MAX_ENTITY_KEY_LENGTH
PARAM_VALUE_MAX, TAG_VALUE_MAX = 6000, 8000  # MLflow's limits (longer values would be cut)
INT64_MAX = 2 ** 63 - 1
SEGMENT_RULE = (f"ASCII letters, digits, '_', '-' and '.' (at most {SEGMENT_MAX} characters, not '.' or '..'; "
                "no slashes)")


def segment_problem(text: Any) -> Optional[str]:
    """Why ``text`` is no safe name segment (None when it is one)."""
    if not isinstance(text, str):
        return f"expected a string, got {shown(text)}"
    if not text:
        return "empty"
    if text in (".", ".."):
        return f"{text!r} names a folder relative to another"
    if len(text) > SEGMENT_MAX:
        return f"{len(text)} characters (at most {SEGMENT_MAX})"
    if not _SEGMENT.fullmatch(text):
        bad = next(c for c in text if not _SEGMENT.fullmatch(c))
        return f"{text!r} holds {bad!r}; a name is {SEGMENT_RULE}"
    return None


def experiment_problem(name: Any) -> Optional[str]:
    """Why ``name`` is no experiment name ``<task>/<dataset>`` (None when it is one)."""
    if not isinstance(name, str):
        return f"expected a string <task>/<dataset>, got {shown(name)}"
    parts = name.split("/")
    if len(parts) != 2:
        return f"{name!r}: expected <task>/<dataset>, each {SEGMENT_RULE}"
    for what, part in zip(("task", "dataset"), parts):
        why = segment_problem(part)
        if why:
            return f"{name!r}: its {what} is no safe name ({why})"
    return None


def key_problem(key: Any) -> Optional[str]:
    """Why ``key`` is no metric, param or tag key MLflow stores as it is (None when it is one)."""
    if not isinstance(key, str):
        return f"the key {key!r} is not a string"
    if not key:
        return "an empty key"
    if len(key) > KEY_MAX:
        return f"the key {key[:40]!r}... has {len(key)} characters (at most {KEY_MAX})"
    if not _KEY.fullmatch(key):
        return (f"the key {key!r} holds a character other than letters, digits, '_', '-', '.', '/', ':' and "
                f"spaces")
    norm = posixpath.normpath(key)
    if norm != key or norm == "." or norm.startswith("..") or norm.startswith("/"):
        return f"the key {key!r} reads as the path {norm!r} (no '..', './', '//' or leading '/')"
    return None


def number_problem(value: Any) -> Optional[str]:
    """Why ``value`` is no finite number (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number, got {shown(value)}"
    try:
        as_float = float(value)
    except OverflowError:
        return f"expected a number, got a whole number of {len(str(abs(value)))} digits (too large)"
    if not math.isfinite(as_float):
        return f"expected a finite number, got {value}"
    return None


def whole_problem(value: Any, low: int = 0, high: int = INT64_MAX) -> Optional[str]:
    """Why ``value`` is no whole number in [low, high] (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected a whole number, got {shown(value)}"
    if not low <= value <= high:
        return f"expected a whole number from {low} to {high}, got {shown(value)}"
    return None


def text_problem(value: Any, limit: int) -> Optional[str]:
    """Why ``value`` is no string of at most ``limit`` characters without NUL (None when it is one)."""
    if not isinstance(value, str):
        return f"expected a string, got {shown(value)}"
    if len(value) > limit:
        return f"a string of {len(value)} characters (at most {limit})"
    if "\0" in value:
        return "a string holding a NUL character"
    return None


def shown(value: Any) -> str:
    """``value`` as the JSON it came from (``"high"``, ``true``, ``null``), cut to 60 characters;
    an object or list by its kind."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether ``path`` (symbolic links and ``..`` resolved) lies in ``root``."""
    return Path(path).resolve().is_relative_to(Path(root).resolve())
