"""Arguments shared by the commands that take a spec. Only argparse at module level:
``multigrain --help`` imports no torch, Ray or MLflow."""
from __future__ import annotations

import argparse

#: ``specs.JSONNET_TIMEOUT`` (not imported: ``--help`` imports nothing of the platform's)
JSONNET_TIMEOUT = 30.0
#: the largest count a command-line option takes (``hints.MAX_COUNT``: a C int)
MAX_COUNT = 2**31 - 1


def add_spec_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="a Jsonnet or JSON spec")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override one spec value (JSON, or a bare string); the key must exist: -o +KEY.PATH=VALUE adds a new key")
    parser.add_argument("--ext-var", action="append", default=[], metavar="NAME=VALUE",
                        help="a Jsonnet external variable (only these are visible to the spec)")
    parser.add_argument("--jsonnet-path", action="append", default=[], metavar="DIR", type=folder,
                        help="a folder the spec's imports may read besides its own folder and jsonnet_configs/")
    parser.add_argument("--jsonnet-timeout", type=seconds, default=JSONNET_TIMEOUT, metavar="SECONDS",
                        help=f"stop evaluating the spec's Jsonnet after this long (an endless recursion, a huge "
                             f"computation): one error naming the spec (default {JSONNET_TIMEOUT:g})")


def add_reader_arg(parser: argparse.ArgumentParser) -> None:
    """``--reader train|validation|test``: which of the spec's readers reads a data file."""
    parser.add_argument("--reader", choices=("train", "validation", "test"), default="test",
                        help="read the data with the spec's test_dataset_reader (default; it falls back to "
                             "the validation reader, then the training reader), validation_dataset_reader or "
                             "dataset_reader")


def load_spec_args(args) -> dict:
    """The resolved spec named by ``add_spec_args``' arguments (not yet validated)."""
    from multigrain.platform.errors import SpecError
    from multigrain.platform.specs import load_spec, parse_ext_vars, repeated_overrides

    if problems := repeated_overrides(args.override or []):
        raise SpecError(problems, str(args.spec))
    return load_spec(args.spec, args.override, parse_ext_vars(args.ext_var), args.jsonnet_path,
                     getattr(args, "jsonnet_timeout", JSONNET_TIMEOUT))


def spec_stem(path: str) -> str:
    """``jsonnet_configs/ner/resume_big.jsonnet`` -> ``resume_big``: a spec's short name."""
    from pathlib import PurePath

    return PurePath(path).name.split(".")[0]


def positive_int(text: str) -> int:
    """argparse type of a count that must be at least 1 (``--batch-size``)."""
    return _count(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type of a count that may be 0 (``--max-retries``)."""
    return _count(text, 0)


def _count(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected at least {least}, got {value}")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_COUNT}, got {value}")
    return value


def finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text}: expected a finite number")
    return value


def positive_float(text: str) -> float:
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a number more than 0")
    return value


def non_negative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a number of 0 or more")
    return value


def host_address(text: str) -> str:
    """argparse type of the address a server listens on (``--host``): never empty, which servers read
    as every interface."""
    if not text.strip() or text != text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected an address to listen on, e.g. 127.0.0.1 (an empty one "
                                         f"would listen on every interface)")
    return text


def folder(text: str) -> str:
    """argparse type of a folder that must be there (``--jsonnet-path``)."""
    import os

    if not text:
        raise argparse.ArgumentTypeError("an empty path (name a folder)")
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text}: " + ("not a folder" if os.path.exists(text) else "no such folder"))
    return text


def seconds(text: str) -> float:
    """argparse type of a time limit: a finite number of seconds above 0 (at most a day)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= 86400:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0 and at most 86400, got {text}")
    return value


class AtomicOutput:
    """A text file written in full or not at all: lines go to a temporary file beside ``path``
    (``.NAME.XXXX.tmp``), which replaces ``path`` when the block ends without an error and is
    removed when it does not. ``None`` writes to stdout.

    The path is checked when the object is made, so a command makes it before any work: a folder
    that does not exist, a path that names a folder, or a folder it may not write in is a
    ConfigurationError naming ``option``. A failed write (a full disk) is a MultigrainError naming
    the path; nothing is left behind. An existing path that is no regular file (``/dev/null``, a
    pipe) is written straight to, never replaced."""

    def __init__(self, path, option: str = "--output-file", keep: dict | None = None):
        self.path = None if path is None else str(path)
        self.option = option
        self.keep = keep or {}  # what the command reads, never replaced (``check_output_path``)
        self.tmp = None
        if self.path is not None:
            check_output_path(self.path, option, self.keep)

    def __enter__(self):
        import os
        import sys
        import tempfile

        if self.path is None:
            self.file = sys.stdout
            return self.file
        check_output_path(self.path, self.option, self.keep)  # again: the folder may have gone meanwhile
        target = os.path.realpath(self.path)  # through a link, as a shell's > would
        if os.path.exists(target) and not os.path.isfile(target):
            self.file = _Checked(self._open(os.open(target, os.O_WRONLY | os.O_TRUNC)), self.path)
            return self.file
        try:
            fd, self.tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                                            dir=os.path.dirname(target))
        except OSError as e:
            from multigrain.platform.errors import ConfigurationError

            raise ConfigurationError(f"{self.option} {self.path}: cannot write in its folder ({e.strerror})") from None
        self.target = target
        self.file = _Checked(self._open(fd), self.path)
        return self.file

    @staticmethod
    def _open(fd: int):
        """The text file of descriptor ``fd`` (tests replace it to simulate a full disk)."""
        import os

        return os.fdopen(fd, "w", encoding="utf-8")

    def __exit__(self, kind, error, trace):
        import os

        if self.path is None:
            return False
        try:
            if kind is not None:
                _quietly(self.file.close)
            else:
                self.file.close()  # flushes: a full disk may only show here
                if self.tmp is not None:
                    os.chmod(self.tmp, 0o666 & ~_umask())  # mkstemp's files are private
                    os.replace(self.tmp, self.target)
                    self.tmp = None
        except OSError as e:
            raise write_failed(self.path, e) from None
        finally:
            if self.tmp is not None:
                _quietly(os.unlink, self.tmp)
                self.tmp = None
        return False


class _Checked:
    """A text file whose failed write (a full disk) is a MultigrainError naming ``path``."""

    def __init__(self, file, path: str):
        self._file, self._path = file, path

    def write(self, text: str) -> int:
        try:
            return self._file.write(text)
        except OSError as e:
            raise write_failed(self._path, e) from None

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as e:
            raise write_failed(self._path, e) from None

    def close(self) -> None:
        self._file.close()


def check_output_path(path: str, option: str = "--output-file", keep: dict | None = None) -> None:
    """Refuse, as a ConfigurationError naming ``option``, an output path that cannot become a file:
    one naming a folder, in a folder that does not exist (or is a file), or that we may not write in;
    and one that would replace what the command reads (``keep``: path -> what it is, e.g. the data
    file, the tracking store; a folder: every file in it, e.g. the run directory)."""
    import os

    from multigrain.platform.errors import ConfigurationError

    refuse_replacing(path, option, keep or {})
    target = os.path.realpath(path)
    folder = os.path.dirname(target) or "."
    if os.path.isdir(target):
        raise ConfigurationError(f"{option} {path}: is a folder; give the name of a file")
    if not os.path.exists(folder):
        raise ConfigurationError(f"{option} {path}: no such folder {os.path.dirname(path) or folder}")
    if not os.path.isdir(folder):
        raise ConfigurationError(f"{option} {path}: {os.path.dirname(path)} is not a folder")
    if os.path.exists(target) and not os.path.isfile(target):
        if not os.access(target, os.W_OK):
            raise ConfigurationError(f"{option} {path}: not writable")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigurationError(f"{option} {path}: no permission to write in {os.path.dirname(path) or folder}")


def refuse_replacing(path: str, option: str, keep: dict) -> None:
    """A ConfigurationError naming ``option`` when writing ``path`` would replace what of ``keep`` the
    command reads (``replaced_input``)."""
    from multigrain.platform.errors import ConfigurationError

    if replaced := replaced_input(path, keep):
        raise ConfigurationError(f"{option} {path}: {replaced}; writing the output there could damage it (give "
                                 f"another file name)")


def run_paths_kept(run_dir: str) -> dict:
    """``keep`` of ``check_output_path`` for a run directory: what the platform keeps there
    (``run_marker.own_paths``), each named; the user's own files there are not in it."""
    from multigrain.platform.run_marker import own_paths

    return {path: f"the run {run_dir}'s {path.name}" for path in own_paths(run_dir)}


def replaced_input(path: str, keep: dict) -> str | None:
    """What of ``keep`` (path -> description) writing the file ``path`` would replace: ``"is <it>"``
    for the same file (through links too), ``"is inside <it>"`` for any path in a kept folder; None
    when nothing."""
    import os

    target = os.path.realpath(path)
    for kept, what in keep.items():
        if kept is None or not str(kept):
            continue
        real = os.path.realpath(kept)
        if os.path.isdir(real):
            if os.path.commonpath([real, target]) == real:
                return f"is inside {what}"
            continue
        try:
            if os.path.isfile(target) and os.path.samefile(real, target):
                return f"is {what}"
        except OSError:
            pass
    return kept_by_the_platform(target)


def kept_by_the_platform(target: str) -> str | None:
    """What writing the file ``target`` (a real path) would destroy, whichever command writes it: a
    file the platform keeps in any run directory (``run_marker.own_paths``: its weights, spec,
    vocabulary...), or an SQLite database (a tracking store). None when neither."""
    import os

    from multigrain.platform.paths import short_path
    from multigrain.platform.run_marker import marked, own_paths

    folder = os.path.dirname(target)
    while True:
        if marked(folder) or (os.path.isfile(os.path.join(folder, "config.json"))
                              and os.path.isfile(os.path.join(folder, "best.pt"))):
            for own in map(str, own_paths(folder)):
                if target == own or target.startswith(own + os.sep):
                    return f"is the run {short_path(folder)}'s {os.path.relpath(target, folder)}"
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    try:
        if os.path.isfile(target):  # never opened otherwise: a FIFO would block
            with open(target, "rb") as handle:
                if handle.read(16) == b"SQLite format 3\x00":
                    return "is an SQLite database (a tracking store?)"
    except OSError:
        pass
    return None


def write_failed(path: str, error: OSError):
    """The MultigrainError of a failed write of the output file ``path``."""
    from multigrain.platform.errors import MultigrainError

    return MultigrainError(f"{path}: cannot write ({error.strerror or error}); nothing was written")


#: errors of writing output: a full disk or quota, a file too big, a closed pipe, an I/O error
_WRITE_ERRNOS = ("ENOSPC", "EDQUOT", "EFBIG", "EPIPE", "EIO")


def report_write_error(error: OSError) -> bool:
    """For ``main``: when ``error`` is a failed write (``> /dev/full``, ``| head``), print it as one
    ``error:`` line and return True (else False: not ours to report). When stdout still holds
    output it cannot write, it is pointed at ``/dev/null`` (the command is over), so that Python's
    flush at exit finds nothing to complain about (no "Exception ignored ... BrokenPipeError")."""
    import errno
    import sys

    if not isinstance(error, BrokenPipeError) and error.errno not in {getattr(errno, n, None) for n in _WRITE_ERRNOS}:
        return False
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        to_devnull(sys.stdout)
    where = f" {error.filename}" if error.filename else ""
    what = ("input/output error while reading or writing" if error.errno == errno.EIO  # a read fails with it too
            else "cannot write the output")
    try:
        print(f"error: {what}{where}: {error.strerror or error}", file=sys.stderr)
    except (OSError, ValueError):
        pass
    return True


def report_path_error(error: OSError) -> bool:
    """For ``main``: when ``error`` is a path the system cannot look up (longer than the filesystem
    allows: an argument or a spec value), print one ``error:`` line naming it, shortened, and return
    True (else False)."""
    import errno
    import sys

    from multigrain.platform.paths import shown_path

    if error.errno != errno.ENAMETOOLONG:
        return False
    print(f"error: {shown_path(error.filename or '')}: {error.strerror or 'file name too long'}", file=sys.stderr)
    return True


def to_devnull(stream) -> None:
    """Point ``stream``'s file descriptor at ``/dev/null``: what it still holds and cannot write (a
    closed pipe, a full disk) goes nowhere, and Python's flush at exit has nothing to complain about."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor
        pass


def _quietly(function, *args) -> None:
    try:
        function(*args)
    except OSError:
        pass


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
