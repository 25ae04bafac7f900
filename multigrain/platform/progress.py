"""Progress of long loops: training and evaluation batches (``progress``) and named stages of
data preparation such as reading a corpus or segmenting a data set (``Stage``), with the count
done (of the total when known), the rate and the time left.

With bars (a terminal, the default) each is a tqdm bar on stderr. Under ``CI=true`` or
``MULTIGRAIN_QUIET=1`` there are no bars: a loop or stage that runs longer than the interval
prints one line every interval instead, so a long first epoch or a 5-minute segmentation is
never silent::

    segmenting (jieba): 12,288/40,000 sentences (30.7%) | 409.6 sentences/s | elapsed 30.0s | remaining ~1m08s
    epoch 1/5: 120/3,000 batches (4.0%) | 4.0 batches/s | elapsed 30.0s | remaining ~12m00s | loss=0.4321

and, for a stage that printed any, a last line when it ends (not when an error stops it). The interval is 30 seconds, or
``MULTIGRAIN_PROGRESS_INTERVAL`` seconds when that is lower (tests set 0.01). Only the innermost
running loop or stage prints (a lattice build inside the reading of a file, a validation inside
an epoch). The cost is one clock reading per update (per batch, per chunk of sentences).
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Callable, Iterable, Iterator, Optional, TextIO

#: the longest time between two lines without bars (seconds)
MAX_INTERVAL = 30.0
INTERVAL_ENV = "MULTIGRAIN_PROGRESS_INTERVAL"

#: the stages and loops running now, innermost last: only the innermost prints lines
_ACTIVE: list = []

#: called with every progress line printed without bars (``set_line_listener``)
_LISTENER: Optional[Callable[[str], None]] = None


def set_line_listener(listener: Optional[Callable[[str], None]]) -> Optional[Callable[[str], None]]:
    """Hand every progress line printed without bars to ``listener`` as well (``None``: to no
    one); returns the previous listener. A suite's Ray worker reports its training's lines to
    the driver this way, which shows them under its own status line."""
    global _LISTENER
    previous, _LISTENER = _LISTENER, listener
    return previous


def _progress_line(line: str, file: Optional[TextIO]) -> None:
    note(line, file)
    if _LISTENER is not None:
        _LISTENER(line)


def quiet() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("MULTIGRAIN_QUIET") == "1"


def interval_problem() -> Optional[str]:
    """Why ``MULTIGRAIN_PROGRESS_INTERVAL`` is no setting (checked when a command starts), or None."""
    setting = os.environ.get(INTERVAL_ENV, "").strip().lower()
    try:
        value = float(setting) if setting and setting != "off" else 0.0
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:
        return (f"{INTERVAL_ENV}={setting!r}: expected a number of seconds >= 0 (at most {MAX_INTERVAL:.0f} are "
                f"used) or 'off'")
    return None


def interval() -> float:
    """Seconds between two progress lines without bars: ``MULTIGRAIN_PROGRESS_INTERVAL`` (a
    number of seconds) when set and lower than 30, else 30; ``off``: no lines (the data-parallel
    workers other than rank 0)."""
    setting = os.environ.get(INTERVAL_ENV, "").strip().lower()
    if setting == "off":
        return math.inf
    try:
        value = float(setting) if setting else MAX_INTERVAL
    except ValueError:
        return MAX_INTERVAL
    return min(MAX_INTERVAL, max(0.0, value)) if value == value else MAX_INTERVAL  # NaN: the default


def note(line: str, file: Optional[TextIO] = None) -> None:
    """A line of information on stderr (printed with or without bars)."""
    print(line, file=file or sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    from multigrain.platform.epoch_log import duration

    return duration(seconds)


def _number(n: float) -> str:
    return f"{n:,}" if float(n).is_integer() else f"{n:,.1f}"


class Stage:
    """A named stage of ``total`` units (None: unknown) advanced by ``update(n)``: a tqdm bar,
    or without bars a line every ``interval()`` seconds (see the module docstring). A context
    manager; ``close()`` ends it. ``clock`` and ``file`` are for tests."""

    def __init__(self, name: str, total: Optional[int] = None, unit: str = "items", file: Optional[TextIO] = None,
                 clock: Callable[[], float] = time.monotonic, bar: Optional[bool] = None):
        self.name, self.total, self.unit, self.clock = name, total, unit, clock
        self.file = file
        self.done = 0
        self.postfix = ""
        self.lines = 0  # progress lines printed
        self.started = clock()
        self.every = interval()
        self.next_line = self.started + self.every
        self._bar = None
        if (not quiet()) if bar is None else bar:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=name, unit=f" {unit}", leave=False, dynamic_ncols=True,
                             file=file or sys.stderr, mininterval=0.5)
        self.closed = False
        _ACTIVE.append(self)

    def __enter__(self) -> "Stage":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(finished=kind is None)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
            return
        now = self.clock()
        if now < self.next_line:
            return
        self.next_line = now + self.every
        if _ACTIVE and _ACTIVE[-1] is not self:  # an inner stage speaks for now
            return
        self.lines += 1
        _progress_line(self.line(now), self.file)

    def set_postfix(self, refresh: bool = False, **values) -> None:
        """Values shown after the numbers (``loss=0.4321``), as tqdm's ``set_postfix``."""
        if self._bar is not None:
            self._bar.set_postfix(refresh=refresh, **values)
        else:
            self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())

    def line(self, now: Optional[float] = None) -> str:
        """``name: done/total unit (pct) | rate unit/s | elapsed | remaining`` (what is known)."""
        elapsed = (self.clock() if now is None else now) - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        count = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        parts = [f"{self.name}: {count} {self.unit}"
                 + (f" ({100 * self.done / self.total:.1f}%)" if self.total else "")]
        parts.append(f"{_number(round(rate, 1))} {self.unit}/s")
        parts.append(f"elapsed {_duration(elapsed)}")
        if self.total is not None and rate > 0 and not self.closed:
            parts.append(f"remaining ~{_duration(max(0, self.total - self.done) / rate)}")
        if self.postfix:
            parts.append(self.postfix)
        return " | ".join(parts)

    def close(self, finished: bool = True) -> None:
        """End the stage; ``finished``: it ran to its end (not stopped by an error or a break)."""
        if self.closed:
            return
        self.closed = True
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self._bar is not None:
            self._bar.close()
        elif self.lines and finished:  # a stage that reported progress says when it ended
            _progress_line(self.line() + " | done", self.file)


class _Lines:
    """``progress`` without bars: iterates ``iterable`` inside a ``Stage`` (lines every interval)."""

    def __init__(self, iterable: Iterable, total: Optional[int], desc: str, unit: str):
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.stage: Optional[Stage] = None

    def __iter__(self) -> Iterator:
        self.stage = Stage(self.desc, self.total, self.unit, bar=False)
        finished = False
        try:
            for item in self.iterable:
                yield item
                self.stage.update()
            finished = True
        finally:
            self.stage.close(finished)

    def set_postfix(self, refresh: bool = False, **values) -> None:
        if self.stage is not None:
            self.stage.set_postfix(**values)


def progress(iterable, total=None, desc: str = "", unit: str = "batches"):
    """``iterable`` with a progress bar, or without bars progress lines (see the module docstring);
    either has tqdm's ``set_postfix``."""
    if quiet():
        return _Lines(iterable, total, desc, unit)
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=f" {unit}", leave=False, dynamic_ncols=True, file=sys.stderr,
                mininterval=0.5)
