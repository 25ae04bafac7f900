"""Command-line values checked before a command does any work: ``--device`` (argparse type) and
the run directory (``-s``), each one clear error. Only the standard library at module level:
``multigrain --help`` imports no torch."""
from __future__ import annotations

import argparse
import os
import re

DEVICES = "cpu, cuda, cuda:N (N: a GPU index)"
#: what the platform puts beside a run directory (``.NAME.lock``) or makes of its name (``NAME.copying``)
NAME_EXTRA = len(".copying")
#: room for the files inside a run directory (``vocabulary/vocabulary.json``, ``resources/...``)
PATH_EXTRA = 64


def device(text: str) -> str:
    """argparse type of ``--device``: ``cpu``, ``cuda`` or ``cuda:N``, a GPU only where this machine
    has one (torch is imported only for a GPU)."""
    match = re.fullmatch(r"(cpu|cuda)(?::([0-9]{1,4}))?", text.strip())
    if not match or (match[1] == "cpu" and match[2] is not None):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device; valid devices: {DEVICES}")
    if match[1] == "cpu":
        return "cpu"
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise argparse.ArgumentTypeError(f"{text}: this machine has no CUDA GPU (torch.cuda.is_available() is "
                                         f"False); use --device cpu")
    index = int(match[2] or 0)
    if index >= count:
        raise argparse.ArgumentTypeError(f"{text}: this machine has {count} CUDA GPU{'s' if count > 1 else ''} "
                                         f"(cuda:0 to cuda:{count - 1})")
    return f"cuda:{index}" if match[2] is not None else "cuda"


def _error(option: str, path, why: str):
    from multigrain.platform.paths import short_path
    from multigrain.platform.errors import ConfigurationError

    return ConfigurationError(f"{option} {short_path(path)}: {why}")


def _stat(path: str):
    """``os.stat`` of ``path``, or None when it does not exist (or lies under a file)."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def check_run_dir(path, option: str = "-s", probed: set | None = None) -> None:
    """Refuse, before anything is read, trained or written, a run directory that cannot be one: a
    regular file, a path under a regular file, a place that cannot be written (``/proc``, a
    read-only file system, no permission), a name longer than the file system allows, or a path that
    is no UTF-8. Only a
    probe folder is made (in the nearest existing folder) and removed at once; a folder already in
    ``probed`` is not probed again (many run directories of one root share it)."""
    try:
        os.path.abspath(path).encode("utf-8")
    except UnicodeEncodeError:  # its files and MLflow record the path as UTF-8 text: it failed after training
        raise _error(option, path, "is no UTF-8 path (it holds a byte that is no UTF-8); rename it") from None
    try:
        _check_run_dir(path, option, probed)
    except OSError as e:  # a loop of symbolic links on the way, a folder we may not look into
        raise _error(option, path, f"cannot be looked up ({e.strerror or e})") from None


def _check_run_dir(path, option: str, probed: set | None) -> None:
    import stat
    import tempfile

    text = os.fsencode(os.path.abspath(path))
    parts = [p for p in text.split(b"/") if p]
    existing = os.path.sep
    for part in parts[:-1]:  # the deepest existing folder, without touching the long names below it
        candidate = os.path.join(existing, os.fsdecode(part))
        if len(part) > 255 or _stat(candidate) is None:
            break
        existing = candidate
    try:
        name_max = os.pathconf(existing, "PC_NAME_MAX")
        path_max = os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for i, part in enumerate(parts):
        limit = name_max - NAME_EXTRA if i == len(parts) - 1 else name_max
        if len(part) > limit:
            shown = os.fsdecode(part)
            raise _error(option, path, f"the name {shown[:20]}... is {len(part)} bytes long; the file system allows "
                                       f"{name_max}" + (f", and a run directory's name at most {limit} (multigrain "
                                                        f"puts .NAME.lock beside it)" if limit < name_max else ""))
    if len(text) + PATH_EXTRA > path_max:
        raise _error(option, path, f"the path is {len(text)} bytes long; with the files inside a run directory it "
                                   f"would pass the file system's limit of {path_max}")
    here = os.path.abspath(path)
    while True:
        info = _stat(here)
        if info is not None:
            break
        here = os.path.dirname(here)
    if not stat.S_ISDIR(info.st_mode):
        what = "a file, not a folder" if stat.S_ISREG(info.st_mode) else "not a folder"
        raise _error(option, path, f"{here} is {what}" if here != os.path.abspath(path)
                     else f"is {what}; give a new or empty folder for the run")
    if probed is not None and here in probed:
        return
    try:
        probe = tempfile.mkdtemp(prefix=".multigrain-probe-", dir=here)
    except OSError as e:
        raise _error(option, path, f"cannot make folders in {here} ({e.strerror or e}); choose a folder you can "
                                   f"write in") from None
    try:
        _write_and_read(probe)
    except OSError as e:
        raise _error(option, path, f"a folder made in {here} cannot be written and read back ({e.strerror or e})"
                                   f"{_umask_note()}") from None
    finally:
        _remove_probe(probe)
    if probed is not None:
        probed.add(here)


def _write_and_read(folder: str) -> None:
    """A file written in ``folder`` (made with this process's umask) and read back, as a run
    directory's files are: a umask taking the owner's permissions away (``umask 777``) fails here,
    not after the run directory was made (it was left empty, mode 000)."""
    name = os.path.join(folder, "probe")
    with open(name, "w", encoding="utf-8") as f:
        f.write("x")
    with open(name, encoding="utf-8") as f:
        f.read()


def _remove_probe(folder: str) -> None:
    """Remove ``check_run_dir``'s probe folder and what is in it, whatever its mode (it is ours)."""
    try:
        os.chmod(folder, 0o700)
        for entry in os.listdir(folder):
            os.unlink(os.path.join(folder, entry))
        os.rmdir(folder)
    except OSError:
        pass


def _umask_note() -> str:
    """Why, when the umask takes some of the owner's permissions away: the fix to name."""
    mask = os.umask(0o022)
    os.umask(mask)
    if not mask & 0o700:
        return "; choose a folder you can write in"
    return (f": the umask {mask:03o} takes the owner's permissions away from new files and folders; set one that "
            f"keeps them (umask 022)")


def check_runs_root(root: str, run_dirs, option: str) -> None:
    """``--runs-dir``/``--runs-root`` and the run directories planned under it, refused before Ray
    starts as ``check_run_dir`` refuses ``-s`` (a file in the way, a place that cannot be written,
    names too long); an empty root too (an unset shell variable, not the working directory)."""
    from multigrain.platform.errors import ConfigurationError

    if not str(root):
        raise ConfigurationError(f"{option}: an empty path (name a folder, or leave the option out)")
    probed: set[str] = set()
    for run_dir in dict.fromkeys(map(str, run_dirs)):
        try:
            check_run_dir(run_dir, option, probed)
        except ConfigurationError as e:
            raise ConfigurationError(f"{e} (a run directory of {option} {root})") from None
