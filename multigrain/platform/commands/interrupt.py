"""SIGTERM unwinds like Ctrl-C while a command runs, so the ``finally`` that shuts down the
in-process Ray runs (the default SIGTERM exit would orphan Ray's agents); an interrupt that lands
where Python drops it is raised again by the training loop (``platform/interruption.py``). Only
the standard library, imported when a command runs."""
from __future__ import annotations


class SigtermAsInterrupt:
    """While inside: SIGTERM, and Ctrl-C, raise ``KeyboardInterrupt`` (in the main thread; elsewhere
    a signal handler cannot be set and nothing changes)."""

    def __enter__(self):
        import threading

        from multigrain.platform import interruption

        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = interruption.install()
        return self

    def __exit__(self, *exc):
        from multigrain.platform import interruption

        if self.previous is not None:
            interruption.restore(self.previous)
        return False


def with_sigterm(command):
    """``command(args)`` run inside ``SigtermAsInterrupt``."""
    def run(args):
        with SigtermAsInterrupt():
            return command(args)

    run.__name__ = command.__name__
    run.__doc__ = command.__doc__
    return run
