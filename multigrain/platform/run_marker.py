"""Which directories are run directories, and which of their files the platform may remove.

A run directory holds the marker file ``.multigrain-run`` (JSON: the format version and the
resource files the platform fitted there), written before anything else goes into it. A
directory with the marker, or with the ``config.json`` of a run made before markers existed, is
a run directory; any other directory that is not empty is never written to nor cleaned: using
it as a run directory is one ConfigurationError naming it and some of its files
(``refuse_foreign``).

When the platform starts a run directory over (``--resume`` of a training that ended before its
first epoch) or clears it (an interrupted quickstart), it removes only what it wrote there:
``PLATFORM_FILES``, their ``.tmp`` files, ``vocabulary/vocabulary.json`` and the resource files
the marker records (``resources/`` of an older, unmarked run is left as it is). Other files, a
user's notes say, are kept.
"""
from __future__ import annotations

import json
import os
import shutil
from itertools import islice
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.plugins import PLUGINS_FILE
from multigrain.platform.resources import FOLDER, Resources
from multigrain.platform.weights import write_atomically

MARKER = ".multigrain-run"
FORMAT = 1
VOCABULARY = "vocabulary"
#: the files the platform writes at the top of a run directory, besides the marker and folders
PLATFORM_FILES = ("config.json", "spec_hash", "best.pt", "last.pt", "metrics.json", "tracking.json", PLUGINS_FILE)
#: what a training writes before its first epoch ends (with the marker and any ``.tmp`` of ours)
EARLY = {"config.json", "spec_hash", VOCABULARY, FOLDER, "tracking.json", "best.pt", PLUGINS_FILE, MARKER}
_OURS = {*PLATFORM_FILES, VOCABULARY, FOLDER, MARKER}


def own_paths(run_dir: str | Path) -> list[Path]:
    """What the platform keeps in a run directory (files and folders): an output written over one of
    them would damage the run; any other name there is the user's."""
    return [Path(run_dir) / name for name in sorted(_OURS)]


def marked(run_dir: Path) -> bool:
    return (Path(run_dir) / MARKER).is_file()


def is_run_dir(run_dir: Path) -> bool:
    """A directory with the marker, or with an older run's ``config.json``."""
    return marked(run_dir) or (Path(run_dir) / "config.json").is_file()


def _entries(folder: Path) -> list[Path]:
    try:
        return list(Path(folder).iterdir())
    except OSError as e:
        raise ConfigurationError(f"{folder}: cannot read the directory ({e.strerror})") from None


def _marker_only(folder: Path) -> bool:
    """Nothing in ``folder`` but the marker (or the marker half-written by a killed process)."""
    return all(p.name in (MARKER, MARKER + ".tmp") for p in _entries(folder))


def is_empty(run_dir: Path) -> bool:
    """Absent, or holding nothing but the marker."""
    run_dir = Path(run_dir)
    return not run_dir.is_dir() or _marker_only(run_dir)


def fitted(run_dir: Path) -> list[str]:
    """The resource files the marker records as fitted by the platform (plain names only)."""
    from multigrain.platform.jsonio import loads

    try:
        names = loads((Path(run_dir) / MARKER).read_text(encoding="utf-8")).get("resources", [])
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and n and "/" not in n and n not in (".", "..")
            and not n.startswith(".")]


def write_marker(run_dir: Path, resources: Sequence[str] = ()) -> None:
    """The marker (atomically), recording ``resources`` as fitted; makes the directory."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": FORMAT, "resources": sorted(set(resources))}) + "\n"
    write_atomically(run_dir / MARKER, lambda f: f.write(text), binary=False)


def mark(run_dir: Path) -> None:
    """Make ``run_dir`` a run directory (adopting an older one) unless it is marked already."""
    if not marked(run_dir):
        write_marker(run_dir)


def _files(folder: Path, prefix: str = "") -> Iterator[str]:
    """Files under ``folder`` depth first in name order (an empty folder as ``name/``), lazily."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:  # unreadable: shown as an empty folder
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            inner = _files(Path(entry.path), f"{prefix}{entry.name}/")
            first = next(inner, None)
            yield f"{prefix}{entry.name}/" if first is None else first
            yield from inner
        else:
            yield prefix + entry.name


def listing(folder: Path, limit: int = 5) -> str:
    """The first ``limit`` files under ``folder`` (relative, in name order), ``and more``."""
    found = list(islice(_files(Path(folder)), limit + 1))
    shown = [f if f.isprintable() else repr(f) for f in found[:limit]]
    return ", ".join(shown) + (" and more" if len(found) > limit else "")


def refuse_foreign(run_dir: Path, resume: bool = False) -> None:
    """A non-empty directory that is no run directory is an error naming it and its first files;
    nothing in it is changed."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigurationError(f"{run_dir}: not a directory; choose a new or empty directory for -s")
    if run_dir.is_dir() and not is_run_dir(run_dir) and not _marker_only(run_dir):
        raise ConfigurationError(
            f"{run_dir}: {'nothing to resume: ' if resume else ''}the directory is not empty and not a multigrain "
            f"run directory (no {MARKER}, no config.json): it holds {listing(run_dir)}; nothing in it was changed; "
            f"choose a new or empty directory for -s")


def _ours(path: Path) -> bool:
    name = path.name
    return name in _OURS or (name.endswith(".tmp") and name[:-4] in _OURS)


def is_early(run_dir: Path) -> bool:
    """Only what a training writes before its first checkpoint (last.pt) is ours there (other files do not count)."""
    return all(p.name in EARLY or p.name.endswith(".tmp") for p in _entries(run_dir) if _ours(p))


def _remove_file(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()


def _remove_known(folder: Path, names: Sequence[str]) -> None:
    """``names`` (and their ``.tmp``) in ``folder``; the folder too when that leaves it empty."""
    if folder.is_symlink() or not folder.is_dir():
        return
    for name in names:
        _remove_file(folder / name)
        _remove_file(folder / (name + ".tmp"))
    if not any(folder.iterdir()):
        folder.rmdir()


def clear(run_dir: Path) -> None:
    """Remove what the platform wrote in the run directory ``run_dir`` (keeping the marker, and
    marking an older one); other files stay. A directory that is no run directory is refused."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return
    refuse_foreign(run_dir)
    resources = fitted(run_dir)
    for name in PLATFORM_FILES:
        _remove_file(run_dir / name)
        _remove_file(run_dir / (name + ".tmp"))
    _remove_file(run_dir / (MARKER + ".tmp"))
    _remove_known(run_dir / VOCABULARY, ["vocabulary.json"])
    _remove_known(run_dir / FOLDER, resources)
    write_marker(run_dir)


def copy_run(source: Path, run_dir: Path) -> None:
    """Make the empty (or absent) ``run_dir`` a copy of the run ``source`` without its
    ``metrics.json``: copied into ``<name>.copying`` beside it, marked first, then renamed. An
    interrupted copy of ours left there is removed; anything else there is an error."""
    tmp = run_dir.with_name(run_dir.name + ".copying")
    if tmp.is_symlink() or tmp.exists():
        if tmp.is_dir() and not tmp.is_symlink() and (marked(tmp) or _marker_only(tmp)):
            shutil.rmtree(tmp)  # an interrupted copy: made by us, marked before anything was copied
        else:
            raise ConfigurationError(f"{tmp}: in the way of copying the run {source} there (not an interrupted "
                                     f"copy of multigrain's); move it away")
    odd = next((p for p in sorted(source.rglob("*")) if p.is_symlink() or not (p.is_file() or p.is_dir())), None)
    if odd is not None:  # a FIFO would block the copy, a device or a link would copy what is outside the run
        kind = "a symbolic link (multigrain writes none)" if odd.is_symlink() else "a pipe, socket or device"
        raise ConfigurationError(f"{odd}: not a regular file ({kind}) in the run {source}; "
                                 f"nothing was copied; remove it or train from scratch in another directory")
    write_marker(tmp, fitted(source))
    try:
        shutil.copytree(source, tmp, ignore=shutil.ignore_patterns("metrics.json", MARKER, MARKER + ".tmp"),
                        dirs_exist_ok=True)
    except (shutil.Error, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        why = e.args[0][0][2] if isinstance(e, shutil.Error) and e.args and e.args[0] else (e.strerror or e)
        raise ConfigurationError(f"{source}: the run could not be copied to {run_dir} ({why}); nothing was "
                                 f"kept of the copy") from None
    if run_dir.is_dir():  # empty but for the marker (``Run.is_empty``)
        _remove_file(run_dir / MARKER)
        _remove_file(run_dir / (MARKER + ".tmp"))
        run_dir.rmdir()
    tmp.rename(run_dir)


class FittedResources(Resources):
    """A fresh run's ``Resources``: a file about to be fitted is recorded in the marker first (the
    marker is then the first file of the run directory; ``clear`` removes the files it names and
    no other files of ``resources/``)."""

    def get(self, name: str, fit: Callable[[Sequence, Path], None]) -> Path:
        plain = name and "/" not in name and not name.startswith(".")  # else Resources.get refuses it
        if plain and self.training is not None and not (self.directory / name).exists():
            run_dir = self.directory.parent
            write_marker(run_dir, [*fitted(run_dir), name])
        return super().get(name, fit)


def fresh_resources(run_dir: Path, training: Optional[Sequence]) -> Resources:
    return FittedResources(Path(run_dir) / FOLDER, training)
