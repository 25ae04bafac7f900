"""Ctrl-C and SIGTERM as a ``KeyboardInterrupt`` that is never lost.

Python runs a signal handler between two bytecodes of the main thread. When those are inside a
``__del__`` or a weakref callback (SQLAlchemy's, as MLflow's objects are collected), the
``KeyboardInterrupt`` the handler raises is printed as "Exception ignored in ..." and dropped, and
the command went on as if it had never been stopped: a training ran to its end after ``kill``.
So the handler also records the request, and the training loop calls ``check()`` at each step: a
request still pending there raises again (and Python's "Exception ignored" traceback for it is not
printed).

Inside an import the handler does not raise: C code (torch's, importing NumPy) dropped the
interrupt and left modules half made, and the command went on to fail later with a wrong error
("maximum recursion depth" loading a sound checkpoint). The signal is sent again every
``RETRY_S`` until it lands outside the import, for at most ``MAX_DEFER_S`` (an import that hangs
is still interrupted). Only the standard library."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Optional

RETRY_S = 0.05
MAX_DEFER_S = 10.0
_IMPORT_MACHINERY = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_pending = False
_deferred_since: Optional[float] = None


def interrupt(signum, frame):
    """A signal handler: record the request, then raise ``KeyboardInterrupt`` (inside an import:
    once the import is done)."""
    global _pending, _deferred_since
    _pending = True
    now = time.monotonic()
    if _importing(frame) and now - (_deferred_since or now) < MAX_DEFER_S:
        _deferred_since = _deferred_since or now
        again = threading.Timer(RETRY_S, _send_again, (signum,))
        again.daemon = True
        again.start()
        return
    _deferred_since = None
    raise KeyboardInterrupt


def _importing(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename in _IMPORT_MACHINERY:
            return True
        frame = frame.f_back
    return False


def _send_again(signum) -> None:
    if _pending and signal.getsignal(signum) is interrupt:  # not if the command has ended since
        os.kill(os.getpid(), signum)


def check() -> None:
    """Raise ``KeyboardInterrupt`` when Ctrl-C or SIGTERM came and its interrupt was dropped."""
    if _pending:
        raise KeyboardInterrupt


def clear() -> None:
    global _pending, _deferred_since
    _pending, _deferred_since = False, None


def install() -> dict:
    """``interrupt`` for SIGTERM, and for SIGINT where Python's own handler has it (not where it is
    ignored: a background job of a shell); the handlers it replaced, for ``restore``."""
    clear()
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, interrupt), "unraisable": sys.unraisablehook}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
    hook = sys.unraisablehook

    def quiet_interrupts(unraisable) -> None:  # a dropped interrupt is raised again by check()
        if not (_pending and unraisable.exc_type is KeyboardInterrupt):
            hook(unraisable)

    sys.unraisablehook = quiet_interrupts
    return previous


def end_at_once_with(code: int) -> None:
    """Once the command has finished and flushed its output: SIGTERM, and Ctrl-C where Python
    handles it, end the process at once with the command's ``code``. The interpreter's teardown
    (atexit hooks, 1-3 s with torch and MLflow loaded) has nothing left to save, and under the
    default action a signal there reported -15 or a traceback for a command that had succeeded."""

    def end(signum, frame):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    signal.signal(signal.SIGTERM, end)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, end)


def restore(previous: dict) -> None:
    previous = dict(previous)
    sys.unraisablehook = previous.pop("unraisable")
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    clear()
