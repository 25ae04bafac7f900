"""Whether a path a spec names is there, asked while the spec is validated: a path the system
cannot even look up (longer than the filesystem allows, a NUL byte) is not there, which the spec
error then says, never an ``OSError`` traceback (``Path.exists`` raises for those on Python 3.11)."""
from __future__ import annotations

from pathlib import Path


def not_found(path: str | Path) -> str:
    """The problem of a spec's path that is not there."""
    return f"file not found: {path} (paths are relative to {Path.cwd()})"


def is_there(path: str | Path, kind: str = "any") -> bool:
    """Whether ``path`` exists (``kind`` "any"), is a file ("file") or a directory ("dir")."""
    try:
        p = Path(path)
        return p.is_file() if kind == "file" else p.is_dir() if kind == "dir" else p.exists()
    except (OSError, ValueError):
        return False
