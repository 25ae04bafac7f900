"""Sentence classification readers -> fields ``text`` (raw), ``chars``, ``label: str``."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

from multigrain.components.readers.files import read_lines, read_text, shorten
from multigrain.components.readers.sentence import SentenceReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.digits import whole_number
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader


class TextClassificationReader(SentenceReader):
    """The classification readers' shared part: one labelled text per example."""

    def _classified(self, path: str, number: int, text: str, label: str) -> Instance:
        text = self._non_empty(path, number, text)
        if not label.strip():
            raise DataError(path, number, "empty label")
        chars = split_chars(text, self.keep_latin_words)
        return Instance({"text": text, "chars": chars, "label": label}, source=(path, number))


@Reader.register("chnsenticorp")
class ChnSentiCorpReader(TextClassificationReader):
    """ChnSentiCorp: TSV with a header naming columns ``label`` and ``text_a``.

    Labels ``"1"`` (positive) / ``"0"`` (negative) are kept as strings. Shipped: train 9,600
    (0: 4,801, 1: 4,799) / dev 1,200 (607 / 593) / test 1,200 (592 / 608).
    """

    def _read(self, path: str) -> Iterator[Instance]:
        lines = read_lines(path)
        header = next(lines, None)
        if header is None:
            return
        columns = header[1].split("\t")
        if "label" not in columns or "text_a" not in columns:
            missing = " and ".join(c for c in ("label", "text_a") if c not in columns)
            count = f"{len(columns)} column{'s' if len(columns) != 1 else ''}"
            raise DataError(path, 1, f"expected a header row of TAB-separated column names label and text_a; the first "
                                     f"line ({count}) names no {missing}")
        label_at, text_at = columns.index("label"), columns.index("text_a")
        for number, line in lines:
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != len(columns):
                raise DataError(
                    path, number, f"expected {len(columns)} TAB-separated columns, found {len(fields)}"
                )
            yield self._classified(path, number, fields[text_at], fields[label_at])


@Reader.register("thucnews_titles")
class ThucNewsTitlesReader(TextClassificationReader):
    """THUCNews headlines: ``headline TAB class-id`` per line.

    Labels are the class names of ``class.txt`` in the same folder (line i names id i) when
    that file is present, else the ids. Only dev.txt and test.txt (10,000 each, 1,000 per class)
    are shipped, so ``split="train"``/``"dev"`` cut a training set out of a file
    deterministically (the ``split`` option every reader has, ``readers/base.py``): a headline is
    dev when ``zlib.crc32(headline.encode()) % 1000 < dev_fraction * 1000``. With the default
    ``dev_fraction=0.1`` on ``dev.txt``: train 8,993 / dev 1,007 headlines (use test.txt, all of it, as the test set).
    """

    def _read(self, path: str) -> Iterator[Instance]:
        names = self._class_names(path)
        for number, line in read_lines(path):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise DataError(path, number, f"expected 2 TAB-separated columns (headline, class id), "
                                              f"found {len(fields)}")
            text, class_id = fields
            label = class_id
            if names is not None:
                class_number = whole_number(class_id, max_digits=9)
                if class_number is None or class_number >= len(names):
                    raise DataError(path, number, f"class id {shorten(class_id)} is not one of 0..{len(names) - 1} "
                                                  f"(class.txt)")
                label = names[class_number]
            yield self._classified(path, number, text, label)

    @staticmethod
    def _class_names(path: str) -> Optional[list[str]]:
        classes = Path(path).parent / "class.txt"
        if not classes.is_file():
            return None
        names: dict[str, int] = {}
        for number, line in enumerate(read_text(str(classes)).splitlines(), 1):
            name = line.strip()
            if name in names:
                raise DataError(str(classes), number, f"class name {shorten(name)} again (line {names[name]} has "
                                                      f"it): two ids would be one label")
            if name:
                names[name] = number
        if not names:
            raise DataError(str(classes), None, "no class names (line i names class id i)")
        return list(names)
