"""SIGTERM unwinds like Ctrl-C while a command runs, so the ``finally`` that shuts down the
in-process Ray runs (the default SIGTERM exit would orphan Ray's agents). Only the standard
library, imported when a command runs."""
from __future__ import annotations


def interrupt(signum, frame):
    """A signal handler raising ``KeyboardInterrupt``."""
    raise KeyboardInterrupt


class SigtermAsInterrupt:
    """While inside: SIGTERM raises ``KeyboardInterrupt`` (in the main thread; elsewhere a signal
    handler cannot be set and nothing changes)."""

    def __enter__(self):
        import signal
        import threading

        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, interrupt)
        return self

    def __exit__(self, *exc):
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
        return False


def with_sigterm(command):
    """``command(args)`` run inside ``SigtermAsInterrupt``."""
    def run(args):
        with SigtermAsInterrupt():
            return command(args)

    run.__name__ = command.__name__
    run.__doc__ = command.__doc__
    return run
