"""``table``: classification and sentence-pair data as TSV, CSV or JSON lines.

- ``format: 'tsv'`` (default): one example per line, fields split at every ``delimiter``
  (default TAB), no quoting (quotes are text);
- ``format: 'csv'``: RFC 4180 CSV (``delimiter`` default ``,``; quoted fields may hold the
  delimiter and line breaks; an example's line is the line its record starts on);
- ``format: 'jsonl'``: one JSON object per line; columns are its keys.

``text_columns`` names one column (classification: fields ``text``, ``chars``, ``label``, as
``chnsenticorp``) or two (pairs: ``text_a``, ``text_b``, ``chars_a``, ``chars_b``, ``label``, as
``bq_corpus``); ``label_column`` the label (``null``: an unlabelled file, e.g. for ``predict``).
A column is a name (from the header row with ``header: true``, the default, or a JSON key) or a
0-based number (delimited files). Labels are strings (a JSON number ``1`` reads as ``"1"``);
``label_map`` renames them (``{"0": "neg", "1": "pos"}``), and then a label it does not name is
a DataError. Blank lines are skipped; a row with another field count than the header (or the
first row) is a DataError naming its line, as are an empty text and an empty label.
"""
from __future__ import annotations

import json
from typing import Any, Iterator, Literal, Optional, Union

from multigrain.components.readers.classification import TextClassificationReader
from multigrain.components.readers.files import (
    read_csv_rows,
    read_json_objects,
    read_lines,
    shorten,
)
from multigrain.components.readers.pair import PairReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError, did_you_mean
from multigrain.platform.kinds import Reader

Column = Union[str, int]


@Reader.register("table")
class TableReader(PairReader, TextClassificationReader):
    """Classification or pair examples from a TSV, CSV or JSON-lines table (see the module
    docstring)."""

    def __init__(
        self,
        text_columns: list[Column],
        label_column: Optional[Column] = "label",
        format: Literal["tsv", "csv", "jsonl"] = "tsv",
        header: bool = True,
        delimiter: Optional[str] = None,
        label_map: Optional[dict[str, str]] = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if format not in ("tsv", "csv", "jsonl"):
            raise ConfigurationError(f"format must be 'tsv', 'csv' or 'jsonl', got {format!r}")
        if len(text_columns) not in (1, 2):
            raise ConfigurationError(f"text_columns: one column (classification) or two (pairs), "
                                     f"got {len(text_columns)}")
        columns = [*text_columns, *([] if label_column is None else [label_column])]
        if len(set(map(str, columns))) != len(columns):
            raise ConfigurationError(f"text_columns and label_column name one column twice: {columns}")
        for column in columns:
            if isinstance(column, bool) or (isinstance(column, int) and column < 0):
                raise ConfigurationError(f"column {column!r}: a name or a number >= 0")
            if isinstance(column, int) and format == "jsonl":
                raise ConfigurationError(f"column {column}: JSON lines name their columns (keys), not numbers")
            if isinstance(column, str) and not header and format != "jsonl":
                raise ConfigurationError(f"column {column!r}: header is false, so columns are numbers (0-based)")
        if delimiter is not None and (not delimiter or format == "jsonl" or (format == "csv" and len(delimiter) != 1)):
            raise ConfigurationError(f"delimiter {delimiter!r}: one or more characters for tsv, one for csv, none "
                                     f"for jsonl")
        self.text_columns = list(text_columns)
        self.label_column = label_column
        self.format = format
        self.header = header
        self.delimiter = delimiter or {"tsv": "\t", "csv": ","}.get(format)
        self.label_map = dict(label_map) if label_map is not None else None
        if len(text_columns) == 1:
            self.lattice_fields = {"chars": "lattice"}
            self.split_key_fields = ("chars",)

    # rows ------------------------------------------------------------------------------------
    def _read(self, path: str) -> Iterator[Instance]:
        rows = self._json_rows(path) if self.format == "jsonl" else self._delimited_rows(path)
        for number, row in rows:
            texts = [self._cell(path, number, row, column, "text") for column in self.text_columns]
            label = None if self.label_column is None else self._label(path, number, row)
            if len(texts) == 2:
                what = tuple(f"column {c!r}" for c in self.text_columns)
                yield self._pair(path, number, texts[0], texts[1], label, what=what)
            elif label is None:
                yield self._unlabelled(path, number, texts[0])
            else:
                yield self._classified(path, number, texts[0], label)

    def _delimited_rows(self, path: str) -> Iterator[tuple[int, Any]]:
        """``(line, row)`` per non-blank row; a header row becomes the names of the columns."""
        names: Optional[dict[str, int]] = None
        width = None
        for number, fields in self._csv_rows(path) if self.format == "csv" else self._tsv_rows(path):
            if width is None:
                width = len(fields)
                if self.header:
                    names = {name.strip(): i for i, name in enumerate(fields)}
                    self._check_names(path, number, names)
                    continue
            if len(fields) != width:
                raise DataError(path, number, f"expected {width} fields separated by {self.delimiter!r}, found "
                                              f"{len(fields)}")
            yield number, (fields, names)

    def _tsv_rows(self, path: str) -> Iterator[tuple[int, list[str]]]:
        for number, line in read_lines(path):
            if line.strip():
                yield number, line.split(self.delimiter)

    def _csv_rows(self, path: str) -> Iterator[tuple[int, list[str]]]:
        for number, row in read_csv_rows(path, self.delimiter):
            if any(field.strip() for field in row):
                yield number, row

    def _json_rows(self, path: str) -> Iterator[tuple[int, Any]]:
        yield from read_json_objects(path)

    def _check_names(self, path: str, number: int, names: dict[str, int]) -> None:
        for column in [*self.text_columns, self.label_column]:
            if isinstance(column, str) and column not in names:
                # the names when the row looks like a header; a single "name" is a line of another file
                found = (f"columns: {', '.join(shorten(n, 20)[1:-1] for n in list(names)[:12])}" if len(names) > 1
                         else f"one column: no {self.delimiter!r} in it")
                raise DataError(path, number, f"no column {column!r} in the header row ({found})"
                                              f"{did_you_mean(column, names)}; set header: false if the file has none")

    # cells -----------------------------------------------------------------------------------
    def _cell(self, path: str, number: int, row: Any, column: Column, what: str) -> str:
        if self.format == "jsonl":
            if column not in row:
                raise DataError(path, number, f"no key {column!r} (keys: "
                                              f"{', '.join(shorten(str(k)) for k in list(row)[:8])})")
            value = row[column]
            if isinstance(value, (int, float)) and not isinstance(value, bool) and what == "label":
                return str(value)
            if not isinstance(value, str):
                raise DataError(path, number, f"{column!r}: expected a string, found {type(value).__name__} "
                                              f"{shorten(json.dumps(value, ensure_ascii=False), 30)}")
            return value
        fields, names = row
        at = names[column] if isinstance(column, str) else column
        if at >= len(fields):
            raise DataError(path, number, f"column {column} needed, but the row has {len(fields)} fields")
        return fields[at]

    def _label(self, path: str, number: int, row: Any) -> str:
        label = self._cell(path, number, row, self.label_column, "label").strip()
        if not label:
            raise DataError(path, number, "empty label")
        if self.label_map is None:
            return label
        if label not in self.label_map:
            raise DataError(path, number, f"label {shorten(label)} is not in label_map (which names "
                                          f"{', '.join(map(repr, self.label_map))})")
        return self.label_map[label]

    def _unlabelled(self, path: str, number: int, text: str) -> Instance:
        text = self._non_empty(path, number, text)
        return Instance({"text": text, "chars": split_chars(text, self.keep_latin_words)}, source=(path, number))
