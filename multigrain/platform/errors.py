"""The errors a user sees: each names the file and line, or the spec path, that is wrong."""
from __future__ import annotations

import difflib
from dataclasses import dataclass


class MultigrainError(Exception):
    """Base of every user-facing error; the CLI prints it without a traceback and exits 2."""


class ConfigurationError(MultigrainError):
    pass


class LossNotFinite(MultigrainError, FloatingPointError):
    """The training loss became NaN or infinite: names the epoch and the steps."""


class PluginWarning(UserWarning):
    """A plugin entry point that failed to load (printed as one ``warning: ...`` line)."""


class DataWarning(UserWarning):
    """Input read as is, or a file rebuilt or not used (printed as one ``warning: path:line: ...`` line)."""


class PlotWarning(UserWarning):
    """A figure drawn with boxes for characters no installed font has (one ``warning: ...`` line)."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (``model.encoder.num_heads``; empty for the whole spec,
    ``--grid KEY`` or ``override KEY`` for the command line), what, and which kind of problem
    (``type``, ``value``, ``missing``, ``unknown_key``, ``injected``, ``file``, ``jsonnet``,
    ``override``, ``argument``) so code can tell problems apart without parsing text."""

    path: str
    message: str
    kind: str = "value"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def at(self, path: str) -> "Problem":
        return Problem(path, self.message, self.kind)


class SpecError(ConfigurationError):
    """Every problem found in a spec, reported at once (rendered here and nowhere else)."""

    def __init__(self, problems: "list[Problem | str]", source: str | None = None):
        self.problems = [p if isinstance(p, Problem) else Problem("", str(p)) for p in problems]
        self.source = source
        head = f"{source}: " if source else ""
        n = len(self.problems)
        lines = [f"{head}{n} error{'s' if n != 1 else ''} in spec:"] + [f"  {p}" for p in self.problems]
        super().__init__("\n".join(lines))

    def __reduce__(self):  # crosses process boundaries (Ray workers) intact
        return (self.__class__, (self.problems, self.source))


class DataError(MultigrainError):
    """Malformed data: names the file and (1-based) line."""

    def __init__(self, path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.detail = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")

    def __reduce__(self):
        return (self.__class__, (self.path, self.line, self.detail))


def quoted(text, limit: int = 60) -> str:
    """``repr`` of ``text`` for an error message, cut to about ``limit`` characters."""
    text = str(text)
    return repr(text) if len(text) <= limit else repr(text[:limit - 3] + "...")


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
