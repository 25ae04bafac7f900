"""Sentence-pair readers -> fields ``text_a``, ``text_b``, ``chars_a``, ``chars_b``, ``label: str``."""
from __future__ import annotations

from typing import Iterator

from multigrain.components.readers.files import read_lines, shorten
from multigrain.components.readers.sentence import SentenceReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader

SEPARATOR = "_!_"


@Reader.register("bq_corpus")
class BqCorpusReader(SentenceReader):
    """BQ corpus: ``sentence1_!_sentence2_!_label`` per line, no header; label ``"1"`` = same
    meaning. Exactly three fields, none empty. Shipped: train 100,000 / dev 10,000 / test 10,000
    pairs, half of each labelled 1.
    """

    lattice_fields = {"chars_a": "lattice_a", "chars_b": "lattice_b"}

    def _read(self, path: str) -> Iterator[Instance]:
        for number, line in read_lines(path):
            if not line.strip():
                continue
            fields = line.split(SEPARATOR)
            if len(fields) != 3:
                raise DataError(
                    path, number,
                    f"expected 3 fields separated by {SEPARATOR!r} (sentence1, sentence2, label), "
                    f"found {len(fields)}: {shorten(line)}",
                )
            text_a = self._non_empty(path, number, fields[0], "sentence1")
            text_b = self._non_empty(path, number, fields[1], "sentence2")
            label = fields[2].strip()
            if not label:
                raise DataError(path, number, "empty label")
            yield Instance(
                {
                    "text_a": text_a,
                    "text_b": text_b,
                    "chars_a": split_chars(text_a, self.keep_latin_words),
                    "chars_b": split_chars(text_b, self.keep_latin_words),
                    "label": label,
                },
                source=(path, number),
            )
