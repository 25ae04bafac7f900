"""Whether a path a spec or a command names is there, asked before any work: a path the system
cannot even look up (longer than the filesystem allows, a NUL byte) is not there, which the error
then says, never an ``OSError`` traceback (``Path.exists`` raises for those on Python 3.11). Also
what such a path must give: first weights (a file, or a run directory's ``best.pt``) and input
files (a regular file, not a folder or a device), each with the one message that says why not."""
from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Optional


def not_found(path: str | Path) -> str:
    """The problem of a spec's path that is not there."""
    return f"file not found: {path}{_relative()}"


def _relative() -> str:
    return f" (paths are relative to {Path.cwd()})"


def is_there(path: str | Path, kind: str = "any") -> bool:
    """Whether ``path`` exists (``kind`` "any"), is a file ("file") or a directory ("dir")."""
    try:
        p = Path(path)
        return p.is_file() if kind == "file" else p.is_dir() if kind == "dir" else p.exists()
    except (OSError, ValueError):
        return False


def weights_path(path: str | Path) -> Path:
    """``path/best.pt`` for a run directory, else ``path`` itself (a ``.pt`` or vector file)."""
    return Path(path) / "best.pt" if is_there(path, "dir") else Path(path)


def weights_missing(path: str | Path) -> Optional[str]:
    """Why a spec's path to first weights (a file, or a run directory's ``best.pt``) gives none; None if it does."""
    if not str(path):
        return "an empty path (name a file, or a run directory)"
    if is_there(path, "dir"):
        return None if is_there(Path(path) / "best.pt", "file") else (
            f"{path} is a folder with no best.pt (give a weights file, or a run directory that has finished an "
            f"epoch){_relative()}")
    return None if is_there(path, "file") else not_found(path)


def input_problem(path: str | Path, what: str) -> Optional[str]:
    """Why ``path`` cannot be read as an input file (``what``: "data file", "input file"); None if it can."""
    if not str(path):
        return f"an empty path (name a {what})"
    if is_there(path, "file"):
        return None
    if is_there(path):
        return f"{path}: not a {what} (a folder or a device)"
    try:
        os.stat(path)
    except OSError as e:
        if e.errno not in (errno.ENOENT, errno.ENOTDIR):  # a name too long to look up, a loop of links
            return f"{shown_path(path)}: {e.strerror}"
    except ValueError:  # a NUL byte
        return f"{shown_path(path)}: not a valid path (it holds a NUL byte)"
    return f"{path}: no such {what}"


def stat_problem(info: os.stat_result, limit: int, what: str) -> Optional[str]:
    """Why a file of ``info`` (``os.stat``'s) is not read whole: no regular file (a FIFO would block
    the read, a device never ends), or larger than ``limit`` bytes (``what``: "spec file"); None when it is read."""
    import stat

    from multigrain.platform.weights import file_kind

    if not stat.S_ISREG(info.st_mode):
        return f"not a regular file ({file_kind(info.st_mode)})"
    if info.st_size > limit:
        return f"{info.st_size:,} bytes, more than the {limit:,} bytes ({limit >> 20} MiB) a {what} may have"
    return None


def short_path(path) -> str:
    """``path`` as an error line shows it: whole up to 100 characters, else its first 60 and last 20."""
    text = str(path)
    return text if len(text) <= 100 else f"{text[:60]}...{text[-20:]}"


def shown_path(path) -> str:
    """``short_path``, with the length of a path it cut."""
    text = str(path)
    return short_path(text) + (f" ({len(text)} characters)" if len(text) > 100 else "")


def output_folder_problem(out: str | Path, markers: tuple[str, ...], reads: tuple = ()) -> Optional[str]:
    """Why a command may not write, and so replace, the folder ``out``: it is, holds or lies in a
    path it reads (``reads``: the run it exports) or the working directory; or it is there and is
    no earlier output of the command (none of ``markers`` in it), so replacing it would delete
    someone's files. None when it may."""
    real = Path(out).resolve()
    for source in reads:
        there = Path(source).resolve()
        if real == there or there.is_relative_to(real) or real.is_relative_to(there):
            return f"{out}: it is, holds or lies in {source}, which the command reads; give a new folder"
    if Path.cwd().resolve().is_relative_to(real):
        return f"{out}: it is or holds the working directory; give a new folder"
    if is_there(out) and not any(is_there(Path(out) / marker, "file") for marker in markers):
        return (f"{out}: there already, and not an earlier output of this command (it holds no "
                f"{' or '.join(markers)}); give a new folder, or remove it yourself")
    return None


def same_folder(recorded: Optional[str], run_dir: str | Path) -> bool:
    """Whether a run's recorded ``run_dir`` (an MLflow tag) is ``run_dir``, also when spelt otherwise
    (``runs/a``, ``./runs/a/`` or its absolute path, read from here)."""
    if recorded is None:
        return False
    try:
        return recorded == str(run_dir) or os.path.samefile(recorded, run_dir)
    except (OSError, ValueError):  # no longer there, not from here, or a NUL byte
        return False
