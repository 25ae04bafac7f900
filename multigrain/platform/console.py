"""The Rich console every table is printed through (leaderboards, comparisons, component lists).

Rich's own reaction to a reader that closed the pipe (``multigrain leaderboard | head``) is
``SystemExit(1)`` with no message; here it is the ``BrokenPipeError`` that ``commands.main``
reports as every other command does (one line, exit 2). A terminal that says it is narrower than
``MIN_WIDTH`` columns (``COLUMNS=0``: Rich printed nothing at all) gets ``FALLBACK_WIDTH``."""
from __future__ import annotations

import sys
from typing import Optional

MIN_WIDTH = 40
FALLBACK_WIDTH = 120


def output_console(width: Optional[int] = None):
    """A Console on stdout: ``width`` columns, or the terminal's (when stdout is one) with
    ``width`` as the fallback for a pipe or file."""
    from rich.console import Console

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    terminal = sys.stdout is not None and sys.stdout.isatty()
    console = PipeAwareConsole(width=None if terminal else width)
    if console.width < MIN_WIDTH:
        console = PipeAwareConsole(width=max(width or 0, FALLBACK_WIDTH))
    return console
