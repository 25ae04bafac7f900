"""SIGTERM unwinds like Ctrl-C while any command runs (``commands.main``), so the ``finally`` that
shuts down the in-process Ray runs (the default SIGTERM exit would orphan Ray's agents) and no
temporary file is left; an interrupt that lands where Python drops it is raised again
(``platform/interruption.py``). Only the standard library, imported when a command runs."""
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
