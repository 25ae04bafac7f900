"""Jsonnet evaluated with a time limit. The evaluator (``_jsonnet``, a C extension) cannot be
interrupted from Python while it runs, so it runs in a forked child process that the parent
kills when the limit is up: ``local f(x) = f(x) tailstrict; f(1)`` or a huge computation is one
error after ``timeout`` seconds instead of a command that never ends.

The fork keeps the normal path fast (a few milliseconds more than evaluating in-process, see
the README's spec-loading measurement): the child inherits the loaded ``_jsonnet`` and the import
callback that confines the spec's imports (``specs._confined_imports``), evaluates, writes its
outcome as JSON to a pipe and exits with ``os._exit`` (nothing of the parent's is flushed or run
twice). It dies with the parent (``lifeline``) and, as a backstop, by SIGALRM a little after the
limit. Where ``os.fork`` does not exist, or with no limit, the evaluation runs in-process.

The child may grow its address space by ``MEMORY_BOUND`` bytes at most (``RLIMIT_AS``; a spec
takes megabytes, ``{['k' + i]: i for i in std.range(1, 5000000)}`` grew to 5.8 GB): past it the
evaluator's allocation fails and it aborts, which is the outcome ``("memory", bound)``. The
child's stderr goes nowhere (the evaluator's own "FATAL ERROR" line is not the message).

Outcomes: ``("ok", json_text)``, ``("error", message)``, ``("unicode", reason, byte)``,
``("timeout",)``, ``("memory", bound)``, ``("died", how)``.
"""
from __future__ import annotations

import json
import math
import os
import select
import signal
import time
from typing import Callable, Optional

from multigrain.platform import lifeline

#: how much the child may grow its address space beyond the parent's (bytes)
MEMORY_BOUND = 2 * 1024 ** 3


def evaluate_here(path: str, text: str, ext_vars: dict, import_callback: Callable) -> tuple:
    """The outcome of evaluating ``text``, the file ``path``'s (its imports relative to its folder), in this process."""
    import _jsonnet

    try:
        return ("ok", _jsonnet.evaluate_snippet(path, text, ext_vars=ext_vars, import_callback=import_callback))
    except UnicodeDecodeError as e:
        return ("unicode", e.reason, e.start)
    except RuntimeError as e:
        return ("error", str(e))


def evaluate(path: str, text: str, ext_vars: dict, import_callback: Callable, timeout: Optional[float]) -> tuple:
    """The outcome of evaluating ``text``, the file ``path``'s, in a child process given ``timeout`` seconds."""
    if timeout is None or not hasattr(os, "fork"):
        return evaluate_here(path, text, ext_vars, import_callback)
    import _jsonnet  # noqa: F401  (loaded before the fork: the child imports nothing)

    lifeline.prepare()
    parent = os.getpid()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        _child(write_end, parent, path, text, ext_vars, import_callback, timeout)
    os.close(write_end)
    data = None
    try:
        data = _read(read_end, time.monotonic() + timeout)
    finally:
        os.close(read_end)
        if data is None:  # timed out, or interrupted (Ctrl-C): the child goes
            _kill(pid)
        _, status = os.waitpid(pid, 0)
    if data is None:
        return ("timeout",)
    if not data and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGABRT:
        return ("memory", MEMORY_BOUND)  # the evaluator aborts when an allocation fails
    if not data:
        how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        return ("died", how)
    return tuple(json.loads(data))


def _read(fd: int, deadline: float) -> Optional[bytes]:
    """Everything written to ``fd`` until its end, or None when ``deadline`` passes first."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child(fd: int, parent: int, path: str, text: str, ext_vars: dict, import_callback: Callable,
           timeout: float) -> None:
    code = 0
    try:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
                signal.signal(sig, signal.SIG_DFL)  # Ctrl-C, SIGTERM and the backstop end it at once
        except ValueError:  # not the main thread: the parent's kill and lifeline still end it
            pass
        lifeline.die_with_parent(parent)
        signal.alarm(math.ceil(timeout) + 5)
        _quiet_stderr()
        _bound_memory(MEMORY_BOUND)
        try:
            outcome = evaluate_here(path, text, ext_vars, import_callback)
        except MemoryError:  # the output did not fit as a Python string
            outcome = ("memory", MEMORY_BOUND)
        except Exception as e:  # noqa: BLE001  (anything else the evaluator raises: one message)
            outcome = ("error", f"{type(e).__name__}: {e}")
        view = memoryview(json.dumps(outcome).encode("ascii"))
        while view:
            view = view[os.write(fd, view):]
    except BaseException:  # noqa: BLE001
        code = 1
    finally:
        os._exit(code)


def _quiet_stderr() -> None:
    """The child's stderr to /dev/null: its outcome travels through the pipe."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
    except OSError:
        pass


def _bound_memory(bound: int) -> None:
    """Limit this process's address space to what it maps now plus ``bound`` bytes (the fork maps
    all the parent's libraries: a fixed limit could be below that), or a lower limit already set."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = min(x for x in (mapped + bound, soft, hard) if x != resource.RLIM_INFINITY)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):  # no /proc (not Linux) or no resource module: unbounded
        pass
