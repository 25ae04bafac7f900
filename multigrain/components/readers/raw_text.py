"""Unlabelled text, one example per line (e.g. for prediction or pre-training)."""
from __future__ import annotations

from typing import Iterator

from multigrain.components.readers.files import read_lines
from multigrain.components.readers.sentence import SentenceReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.kinds import Reader


@Reader.register("raw_text")
class RawTextReader(SentenceReader):
    """One text per line (blank lines skipped) -> fields ``text`` (the line as is) and ``chars``."""

    def _read(self, path: str) -> Iterator[Instance]:
        for number, line in read_lines(path):
            if line.strip():
                yield Instance({"text": line, "chars": split_chars(line, self.keep_latin_words)}, source=(path, number))
