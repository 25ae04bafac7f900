"""zh->en translation readers -> fields ``source`` (Chinese, raw), ``chars`` (its tokens),
``references: list[str]`` (English)."""
from __future__ import annotations

from typing import Iterator

from multigrain.components.readers.files import read_csv_rows, read_lines
from multigrain.components.readers.sentence import SentenceReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader


class TranslationReader(SentenceReader):
    def _pair(self, path: str, number: int, source: str, references: list[str]) -> Instance:
        source = self._non_empty(path, number, source, "source sentence")
        for reference in references:
            self._non_empty(path, number, reference, "reference")
        return Instance(
            {"source": source, "chars": split_chars(source, self.keep_latin_words), "references": references},
            source=(path, number),
        )


@Reader.register("tatoeba_cmn_eng")
class TatoebaReader(TranslationReader):
    """Tatoeba cmn-eng: ``English TAB Chinese [TAB attribution]`` per line (a leading byte-order
    mark is dropped, blank lines skipped). Source = Chinese, one English reference.

    29,155 pairs and no official split: ``split`` (``readers/base.py``) cuts one by the stable hash of the pair,
    ``b = zlib.crc32(f"{english}\\t{chinese}".encode()) % 1000``: test when
    ``b < test_fraction*1000``, dev when below ``(test_fraction+dev_fraction)*1000``, else train.
    With the defaults (0.05 / 0.05): train 26,309 / dev 1,473 / test 1,373 pairs.
    """

    def __init__(self, dev_fraction: float = 0.05, test_fraction: float = 0.05, **kwargs):
        super().__init__(dev_fraction=dev_fraction, test_fraction=test_fraction, **kwargs)

    def _split_key(self, instance: Instance) -> str:
        return f"{instance['references'][0]}\t{instance['source']}"

    def _read(self, path: str) -> Iterator[Instance]:
        for number, line in read_lines(path):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) not in (2, 3):
                raise DataError(
                    path, number,
                    f"expected 3 TAB-separated fields (English, Chinese, attribution), found {len(fields)}",
                )
            yield self._pair(path, number, fields[1], [fields[0]])


@Reader.register("wmt_newstest")
class WmtNewstestReader(TranslationReader):
    """WMT newstest zh->en as CSV (RFC 4180 quoting) with header row ``0,1``: column 0 the
    Chinese source, column 1 the English reference. Shipped: wmt18 3,960 / wmt19 2,001 /
    wmt20 1,418 pairs. ``source`` line numbers are those of each record's first line.
    """

    def _read(self, path: str) -> Iterator[Instance]:
        for number, row in read_csv_rows(path):
            if number == 1:
                if row != ["0", "1"]:
                    found = f"{len(row)} field{'s' if len(row) != 1 else ''}"
                    raise DataError(path, 1, f"expected the header row '0,1', found a row of {found}"
                                             + (" not named 0 and 1" if len(row) == 2 else ""))
                continue
            if not row:
                continue
            if len(row) != 2:
                raise DataError(path, number, f"expected 2 CSV fields (Chinese, English), found {len(row)}")
            yield self._pair(path, number, row[0], [row[1]])
