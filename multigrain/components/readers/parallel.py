"""``parallel_refs``: a source file and N line-aligned reference files (WMT22's general test:
``src.zh`` + ``ref.A.en`` + ``ref.B.en``), any reference may also be a NIST SGML refset."""
from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Iterator, Optional

from multigrain.components.readers.detokenize import moses_detokenize
from multigrain.components.readers.files import read_lines
from multigrain.components.readers.nist import parse_sgm_systems
from multigrain.components.readers.translation import TranslationReader
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Reader
from multigrain.platform.paths import input_problem


class ReferenceStream:
    """One reference of every source line: ``texts[i]`` for line ``i + 1``, ``lines[i]`` where it is
    in ``path`` (for error messages)."""

    def __init__(self, path: str, texts: list[str], lines: list[int], name: str = ""):
        self.path, self.texts, self.lines, self.name = path, texts, lines, name

    @property
    def label(self) -> str:
        return f"{self.path} (sysid {self.name!r})" if self.name else self.path


def reference_streams(path: str) -> list[ReferenceStream]:
    """The reference streams of one file: a ``.sgm``/``.xml`` file gives one per ``sysid``
    (segments in file order, see ``readers/nist.py``), any other file one line per segment."""
    if Path(path).suffix.lower() in (".sgm", ".xml"):
        return [ReferenceStream(path, [s.text for s in system.segments.values()],
                                [s.line for s in system.segments.values()], system.system)
                for system in parse_sgm_systems(path)]
    numbered = list(read_lines(path))
    return [ReferenceStream(path, [text for _, text in numbered], [number for number, _ in numbered])]


def find_reference(source: str, pattern: str) -> list[str]:
    """The files ``pattern`` (a path or a glob) names, sorted; a relative pattern that matches
    nothing from the working folder is tried next to ``source``. None: a DataError."""
    matches = sorted(glob.glob(pattern))
    if not matches and not os.path.isabs(pattern):
        matches = sorted(glob.glob(str(Path(source).parent / pattern)))
    if not matches:
        raise DataError(source, None, f"no reference file matches {pattern!r}")
    for match in matches:  # a folder, a FIFO (blocks), /dev/zero (never ends) or a loop of links
        problem = input_problem(match, "reference file")
        if problem is not None:
            raise DataError(source, None, f"its reference {problem}")
    return matches


class LineAlignedReader(TranslationReader):
    """A source file and reference files aligned with its lines (see ``ParallelRefsReader``);
    ``reference_patterns(path)`` gives the references of a source when ``references`` is None."""

    def __init__(self, references: Optional[list[str]] = None, detokenize_references: bool = False, **kwargs):
        super().__init__(**kwargs)
        if references is not None and not references:
            raise ConfigurationError("references: give at least one reference file")
        self.references = references
        self.detokenize_references = detokenize_references

    def reference_patterns(self, path: str) -> list[str]:
        raise NotImplementedError

    def with_references(self, path: str, extra: list[str]) -> "LineAlignedReader":
        """A copy reading, for ``path``, the references this reader reads and then ``extra``
        (``multigrain evaluate --references``); each is checked like the others when read."""
        import copy

        reader = copy.copy(self)
        reader.references = [*(self.references if self.references is not None else self.reference_patterns(path)),
                             *extra]
        return reader

    def _read(self, path: str) -> Iterator[Instance]:
        patterns = self.references if self.references is not None else self.reference_patterns(path)
        files = [f for pattern in patterns for f in find_reference(path, pattern)]
        source = list(read_lines(path))
        streams = [stream for f in dict.fromkeys(files) for stream in reference_streams(f)]
        for stream in streams:
            if len(stream.texts) != len(source):
                raise DataError(stream.path, None, f"{len(stream.texts):,} reference segments"
                                                   f"{f' of sysid {stream.name!r}' if stream.name else ''}, but the "
                                                   f"source {path} has {len(source):,} lines")
        for i, (number, text) in enumerate(source):
            references = [self._reference(stream, i) for stream in streams]
            yield self._pair(path, number, text, references)

    def _reference(self, stream: ReferenceStream, i: int) -> str:
        text = stream.texts[i].strip()
        if self.detokenize_references:
            text = moses_detokenize(text)
        if not text.strip():
            raise DataError(stream.path, stream.lines[i],
                            f"empty reference{f' (sysid {stream.name!r})' if stream.name else ''}")
        return text


@Reader.register("parallel_refs")
class ParallelRefsReader(LineAlignedReader):
    """A source file (one sentence per line) and its ``references``: files or glob patterns, each
    line-aligned with the source (a plain text file) or a NIST SGML refset (``.sgm``: one reference
    per ``sysid``, its segments in file order). Relative patterns that match nothing from the
    working folder are tried next to the source.

    Fields: ``source``, ``chars``, ``references: list[str]`` (in the order of ``references``; the
    first is the training target); ``source`` = (source file, line).

    Checked before the first instance: every reference has as many segments as the source has
    lines (else a DataError naming the reference and both counts); an empty source line or an empty
    reference line is a DataError naming its file and line. ``detokenize_references``: references
    written by Moses' tokenizer (``it &apos;s``) are detokenized (``readers/detokenize.py``).
    The source and its references are read whole (test sets; a training corpus of a few hundred
    MB fits as well).
    """

    def __init__(self, references: list[str], detokenize_references: bool = False, **kwargs):
        super().__init__(references, detokenize_references, **kwargs)
