"""What the process was started with, checked before any command runs (``cli.main``): each
problem here surfaced late, as a traceback, or not at all.

- A closed standard stream (``>&-``, ``2>&-``): the next file the process opened took its number,
  so a native library's output or ``print(file=sys.stderr)`` (which prints to stdout when stderr is
  None) went into that file (``predict``'s JSON lines ended with its summary line). The numbers are
  held by ``/dev/null``; a closed stdout is an error, a closed stderr is silenced.
- An output encoding without Chinese (``PYTHONIOENCODING=ascii``, ``LC_ALL=C`` with
  ``PYTHONUTF8=0``): ``predict``, ``leaderboard`` and ``compare`` died with UnicodeEncodeError,
  ``train`` after its run had finished. Characters it cannot encode are written as ``\\uXXXX``
  escapes instead (JSON lines stay valid JSON).
- A working directory that was deleted: tracebacks, or torch's "Intel oneMKL FATAL ERROR".
- An open-file limit too small for torch and MLflow (``ulimit -n 8``): a traceback at the end of
  training, and the MLflow run left RUNNING.
- ``MULTIGRAIN_PROGRESS_INTERVAL`` that is no number (it was silently the default).

Only the standard library: ``--help`` goes through here."""
from __future__ import annotations

import os
import sys
from typing import Optional

#: the fewest open files a command may be started with (torch, MLflow's store, a run's files)
MIN_OPEN_FILES = 64


def prepare() -> Optional[str]:
    """Make the process safe to run a command in; the error line to stop with, or None."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            held = os.open(os.devnull, os.O_RDWR)
            if held != fd:
                os.dup2(held, fd)
                os.close(held)
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if stream is not None and encoding not in ("utf8", "utf16", "utf32", "gb18030"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (AttributeError, ValueError):
                pass
    if sys.stdout is None:
        return "standard output is closed (>&-): send it to a file, or to /dev/null"
    try:
        os.getcwd()
    except FileNotFoundError:
        return "the working directory no longer exists: run the command from a folder that does"
    except OSError as e:
        return f"the working directory cannot be read ({e.strerror})"
    from multigrain.platform.progress import interval_problem

    return _open_files_problem() or interval_problem()


def _open_files_problem() -> Optional[str]:
    """Raise the soft limit of open files to ``MIN_OPEN_FILES`` when the hard one allows; else why not."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= MIN_OPEN_FILES:
        return None
    if hard == resource.RLIM_INFINITY or hard >= MIN_OPEN_FILES:
        resource.setrlimit(resource.RLIMIT_NOFILE, (MIN_OPEN_FILES, hard))
        return None
    return (f"the limit of open files is {hard} (ulimit -n); a command needs at least {MIN_OPEN_FILES}: "
            f"raise it with ulimit -n {MIN_OPEN_FILES * 16}")
