"""Sentence-pair readers -> fields ``text_a``, ``text_b``, ``chars_a``, ``chars_b``, ``label: str``."""
from __future__ import annotations

from typing import Iterator, Optional

from multigrain.components.readers.files import read_lines
from multigrain.components.readers.sentence import SentenceReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader

SEPARATOR = "_!_"


class PairReader(SentenceReader):
    """The pair readers' shared part: one Instance per labelled (or unlabelled) pair of texts,
    a lattice for each text, splits keyed by both texts."""

    lattice_fields = {"chars_a": "lattice_a", "chars_b": "lattice_b"}
    split_key_fields = ("chars_a", "chars_b")

    def _pair(self, path: str, number: int, text_a: str, text_b: str, label: Optional[str],
              what: tuple[str, str] = ("sentence1", "sentence2")) -> Instance:
        """The Instance of one pair; an empty text or (when given) an empty label is a DataError."""
        fields = {"text_a": self._non_empty(path, number, text_a, what[0]),
                  "text_b": self._non_empty(path, number, text_b, what[1]),
                  "chars_a": split_chars(text_a, self.keep_latin_words),
                  "chars_b": split_chars(text_b, self.keep_latin_words)}
        if label is not None:
            if not label.strip():
                raise DataError(path, number, "empty label")
            fields["label"] = label
        return Instance(fields, source=(path, number))


@Reader.register("bq_corpus")
class BqCorpusReader(PairReader):
    """BQ corpus: ``sentence1_!_sentence2_!_label`` per line, no header; label ``"1"`` = same
    meaning. Exactly three fields, none empty. Shipped: train 100,000 / dev 10,000 / test 10,000
    pairs, half of each labelled 1.
    """

    def _read(self, path: str) -> Iterator[Instance]:
        for number, line in read_lines(path):
            if not line.strip():
                continue
            fields = line.split(SEPARATOR)
            if len(fields) != 3:
                raise DataError(
                    path, number,
                    f"expected 3 fields separated by {SEPARATOR!r} (sentence1, sentence2, label), "
                    f"found {len(fields)}",
                )
            yield self._pair(path, number, fields[0], fields[1], fields[2].strip())
