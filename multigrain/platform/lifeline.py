"""A child process that dies with its parent (Linux: ``prctl(PR_SET_PDEATHSIG)``), for the
processes multigrain starts and must not leave behind when it is killed, even by SIGKILL: the
Jsonnet evaluator (``jsonnet_child``) and the MLflow UI's supervisor (``process_group``).
Only the standard library; elsewhere than Linux it does nothing."""
from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_libc = None


def _prctl(option: int, value: int) -> bool:
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _libc is None:
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True)
        return _libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def prepare() -> None:
    """Load libc now, in the parent, so that a child forked later needs no import."""
    _prctl(-1, 0)


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """Call in the child: ``sig`` arrives when the parent (``parent_pid``) ends. A parent that
    ended before this call (the child was adopted already) ends the child at once."""
    _prctl(PR_SET_PDEATHSIG, int(sig))
    if os.getppid() != parent_pid:
        os._exit(1)


def adopt_orphans() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux 3.4+), so that it can wait
    for the grandchildren a child leaves behind."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)
