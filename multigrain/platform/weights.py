"""Reading and writing torch files of weights: the one place the package calls ``torch.load`` and
``torch.save``.

``load_weights`` reads a dict of tensors and plain values with ``weights_only=True`` (a crafted
file cannot run code: a pickle naming any Python object is refused, the object named in the
error). Everything else is one ``ConfigurationError`` naming the file and what is wrong: no such
file, not a regular file (a FIFO would block the reader forever, a device or socket is no
checkpoint), empty, truncated, not a torch file, a file holding something other than a dict.
``tensor_dict`` checks that what it holds is a state dict; ``load_into`` makes ``load_state_dict``'s
error one naming the file and the first name that does not fit (with both shapes).

``save_weights`` writes ``FILE.tmp`` and renames it over ``FILE`` (a reader never sees half a
file); when writing fails (a full disk) the temporary file is removed, ``FILE`` is left as it was,
and the error says why (``no space left on device writing FILE``).

torch is imported inside the functions: ``multigrain --help`` imports this module's importers.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Callable, Optional

from multigrain.platform.errors import ConfigurationError

#: what a file other than a regular one is, for the error
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a plain file")


def regular_file(path: Path, what: str = "checkpoint", where: str = "") -> None:
    """Refuse what is not a regular file before anything opens it (``open`` of a FIFO blocks until
    a writer comes); a missing file is ``no such {what}``."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ConfigurationError(f"{where}{path}: no such {what}") from None
    except OSError as e:
        raise ConfigurationError(f"{where}{path}: cannot read the {what} ({e.strerror})") from None
    if not stat.S_ISREG(mode):
        raise ConfigurationError(f"{where}{path}: not a regular file ({file_kind(mode)}); a {what} is a file "
                                 f"written by torch.save")


def torch_file(path: Path, what: str = "checkpoint", where: str = "") -> None:
    """``regular_file``, and whole as a torch zip file (its central directory, a pickle in it): a
    truncated, empty or foreign file is refused without reading its tensors (``load_weights`` reads
    and checks those)."""
    import zipfile

    regular_file(path, what, where)
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            compressed = _compressed_in(archive, os.path.getsize(path))
    except zipfile.BadZipFile:
        empty = os.path.getsize(path) == 0
        raise ConfigurationError(f"{where}{path}: not a multigrain {what}, or damaged "
                                 f"({'an empty file' if empty else 'a truncated or damaged torch zip file'})") from None
    except OSError as e:
        raise ConfigurationError(f"{where}{path}: cannot read the {what} ({e.strerror})") from None
    if not any(name.endswith("/data.pkl") for name in names):
        raise ConfigurationError(f"{where}{path}: not a multigrain {what} (a zip file that torch.save did not write)")
    if compressed:
        raise ConfigurationError(f"{where}{path}: not a multigrain {what} ({compressed})")


def _allowed_globals() -> list:
    """The NumPy types that checkpoints written before the RNG states were stored as tensors need
    (NumPy's state as an array), nothing else."""
    import numpy as np

    return [np.ndarray, np.dtype, np.dtypes.UInt32DType, np._core.multiarray._reconstruct]


def refusal_reason(error: BaseException) -> str:
    """Why torch could not load a file, in a few words: the Python object a pickle names (which
    ``weights_only`` refuses), a truncated zip, or torch's first line."""
    text = str(error).strip()
    blocked = re.search(r"GLOBAL ([\w.]+)", text)
    if blocked:
        return (f"it names the Python object {blocked.group(1)}, which a file of weights never holds; "
                f"refused without running it")
    if isinstance(error, EOFError):
        return "it ends too early"
    if "central directory" in text or "PytorchStreamReader" in text or "zip archive" in text:
        return "a truncated or damaged torch zip file"
    unsupported = re.search(r"WeightsUnpickler error: *\n*(.+)", text)
    if unsupported and unsupported.group(1).strip():
        return f"not a torch file of weights: {unsupported.group(1).strip()[:200]}"
    if "invalid load key" in text or "magic number" in text:
        return f"not a torch file ({text.splitlines()[0][:200]})"
    first = text.splitlines()[0] if text else type(error).__name__
    return first[:300]


def load_weights(path, what: str = "checkpoint", device="cpu", where: str = "") -> dict:
    """The dict in the torch file ``path`` (tensors and plain values, on ``device``), loaded with
    ``weights_only=True``; anything else is a ConfigurationError ``{where}{path}: ...`` naming what
    is wrong (``what``: the kind of file, for the message: ``checkpoint``)."""
    import warnings

    import torch

    path = Path(path)
    regular_file(path, what, where)
    try:  # O_NONBLOCK: should the file have become a FIFO since the check, opening it does not block
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ConfigurationError(f"{where}{path}: cannot read the {what} ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigurationError(f"{where}{path}: not a regular file ({file_kind(info.st_mode)}); a {what} "
                                     f"is a file written by torch.save")
        if info.st_size == 0:
            raise ConfigurationError(f"{where}{path}: not a multigrain {what}, or damaged (an empty file)")
        if problem := _compressed_member(f, info.st_size):  # inflating one took 3 GB before torch said so
            raise ConfigurationError(f"{where}{path}: not a multigrain {what} ({problem})")
        try:
            with warnings.catch_warnings(), torch.serialization.safe_globals(_allowed_globals()):
                warnings.simplefilter("ignore")  # torch's notes on pickle protocols: the error says it
                state = torch.load(f, map_location=device, weights_only=True)
        except Exception as e:  # unpickling refused, truncated, or not a torch file at all
            raise ConfigurationError(f"{where}{path}: not a multigrain {what}, or damaged "
                                     f"({refusal_reason(e)})") from None
    if not isinstance(state, dict):
        raise ConfigurationError(f"{where}{path}: not a multigrain {what} (holds a {type(state).__name__})")
    return state


def _compressed_member(f, size: int) -> Optional[str]:
    """Why the torch zip file ``f`` (``size`` bytes) is none that torch.save wrote, read from its
    central directory alone: torch.save stores every member uncompressed, so a compressed member, or
    one larger than the file, is a zip bomb or a foreign file. None when it is no zip at all (torch
    names that) or every member is stored."""
    import zipfile

    try:
        with zipfile.ZipFile(f) as archive:
            return _compressed_in(archive, size)
    except (zipfile.BadZipFile, ValueError, OverflowError):
        return None
    finally:
        f.seek(0)


def _compressed_in(archive, size: int) -> Optional[str]:
    """``_compressed_member`` of the open ``zipfile.ZipFile`` ``archive``."""
    import zipfile

    for member in archive.infolist():
        if member.compress_type != zipfile.ZIP_STORED or member.file_size > size:
            return (f"its member {member.filename[:80]!r} is compressed, {member.file_size:,} bytes in "
                    f"{member.compress_size:,}; torch.save stores tensors uncompressed")
    return None


def tensor_dict(state: dict, path, where: str = "", entry: str = "") -> dict:
    """``state`` when it is a state dict (names to tensors; ``*_extra_state`` may hold anything),
    else a ConfigurationError naming the first entry that is not (``entry``: where in the file the
    state dict is, e.g. ``model``)."""
    import torch

    at = f"{entry}: " if entry else ""
    if not isinstance(state, dict):
        raise ConfigurationError(f"{where}{path}: {at}expected a dict of tensors, found {describe(state)}")
    for name, value in state.items():
        if not isinstance(name, str):
            raise ConfigurationError(f"{where}{path}: {at}a tensor name is {describe(name)}, not a string")
        if not isinstance(value, torch.Tensor) and not name.endswith("_extra_state"):
            raise ConfigurationError(f"{where}{path}: {at}{name} is {describe(value)}, not a tensor")
    return state


def load_into(model, state: dict, path: Path, entry: str = "") -> None:
    """``model.load_state_dict(state)``, its error (missing or unexpected names, another shape) made
    one ConfigurationError naming the file and the first name that does not fit."""
    try:
        model.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:
        at = f" ({entry})" if entry else ""
        raise ConfigurationError(f"{path}{at}: the weights do not fit the run's model: {mismatch(str(e))}") from None


def mismatch(message: str) -> str:
    """The first problem of a ``load_state_dict`` error, in our words."""
    sizes = re.findall(r"size mismatch for ([^:\s]+): copying a param with shape torch\.Size\(\[([^\]]*)\]\) from "
                       r"checkpoint, the shape in current model is torch\.Size\(\[([^\]]*)\]\)", message)
    more = lambda items, what: f" (and {len(items) - 1} more {what})" if len(items) > 1 else ""  # noqa: E731
    if sizes:
        name, theirs, ours = sizes[0]
        return f"{name} has shape {_shape(theirs)} in the file, {_shape(ours)} in the model{more(sizes, 'mismatches')}"
    for label, what in (("Missing", "missing from the file"), ("Unexpected", "in the file, not in the model")):
        found = re.search(label + r' key\(s\) in state_dict: ((?:"[^"]*"(?:, )?)+)', message)
        if found:
            names = re.findall(r'"([^"]*)"', found.group(1))
            return f"{names[0]} is {what}{more(names, 'names')}"
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return (lines[1] if len(lines) > 1 and lines[0].startswith("Error(s) in loading") else lines[0] if lines
            else "load_state_dict failed")[:300]


def _shape(dims: str) -> str:
    parts = [d.strip() for d in dims.split(",") if d.strip()]
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


def describe(value) -> str:
    """``a list``, ``an int (5)``, ``a tensor of shape (3, 2)``: what a value in a file is."""
    import torch

    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    name = type(value).__name__
    article = "an" if name[:1] in "aeiou" else "a"
    if value is None:
        return "null"
    if isinstance(value, (bool, int, float)):
        return f"{article} {name} ({value!r})"
    if isinstance(value, str):
        return f"a str ({value[:40]!r})"
    return f"{article} {name}"


def save_weights(obj, path) -> None:
    """``torch.save(obj)`` to ``path`` through ``path.tmp`` (see the module docstring)."""
    import torch

    write_atomically(Path(path), lambda f: torch.save(obj, f))


def write_atomically(path: Path, write: Callable, binary: bool = True) -> None:
    """``write(file)`` into ``path.tmp``, flushed to the disk, then renamed over ``path``. On any
    failure ``path.tmp`` is removed and ``path`` is left as it was; an OSError (a full disk, a
    quota, a read-only file system) becomes a ConfigurationError naming ``path``, and Ctrl-C or
    SIGTERM during a write stays a ``KeyboardInterrupt``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    sink: Optional[_RecordingWriter] = None
    try:
        with os.fdopen(create_new(tmp), "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            sink = _RecordingWriter(f)
            write(sink)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        cause = sink.error if sink is not None and sink.error is not None else e
        if isinstance(cause, OSError):
            raise ConfigurationError(write_failure(path, cause)) from None
        if isinstance(cause, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        raise


def create_new(path: Path) -> int:
    """A descriptor of a new, empty file at ``path``, opened for writing. Whatever was there is
    removed first (a ``.tmp`` left by a killed process, or a symbolic link planted in a copied run
    directory: the link goes, never what it points to), and the file is created exclusively and
    without following a link, so a write never lands outside the folder of ``path``."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)


def open_lock(path: Path):
    """``path`` opened for reading and appending (a lock file: flock, a pid), created if missing,
    never through a symbolic link: a link there is a ConfigurationError, and the file it points to
    is neither created, written nor removed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP or Path(path).is_symlink():
            raise ConfigurationError(f"{path}: a symbolic link where multigrain keeps a lock file; remove it "
                                     f"(the file it points to is left alone)") from None
        raise
    return os.fdopen(fd, "a+", encoding="utf-8")


def write_failure(path: Path, error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        why = "no space left on device"
    elif error.errno == getattr(errno, "EDQUOT", None):
        why = "disk quota exceeded"
    else:
        why = error.strerror or str(error)
    return f"{why} writing {path} (the file was not changed)"


class _RecordingWriter:
    """A file's ``write``/``flush`` that remembers the OSError a write raised, or the Ctrl-C or
    SIGTERM (``KeyboardInterrupt``) that came during it: torch's zip writer turns either into a
    RuntimeError (``unexpected pos``) that no longer says the disk is full, or that the user stopped."""

    def __init__(self, f):
        self.f = f
        self.error: Optional[BaseException] = None

    def write(self, data):
        try:
            return self.f.write(data)
        except (OSError, KeyboardInterrupt) as e:
            self.error = e
            raise

    def flush(self):
        try:
            self.f.flush()
        except (OSError, KeyboardInterrupt) as e:
            self.error = e
            raise
