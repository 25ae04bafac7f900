"""``jsonl_spans``: NER data as JSON lines of a text and its labelled character spans.

One JSON object per line (blank lines skipped), e.g.::

    {"text": "张三在北京工作", "spans": [{"start": 0, "end": 2, "label": "PER"},
                                        {"start": 3, "end": 5, "label": "LOC", "text": "北京"}]}

Three layouts of the spans value are read (field names configurable):

- a list of objects ``{"start", "end", "label"}`` (a ``"text"`` key, when there, is checked
  against the text at those offsets);
- a list of ``[start, end, label]`` lists;
- CLUENER's object ``{label: {mention: [[start, end], ...]}}`` (its ends are inclusive: set
  ``offsets: 'inclusive'``); each mention is checked against the text.

Offsets count characters (Python code points) of the text; ``offsets`` says whether ``end`` is
the first character after the mention (``exclusive``, Python slices, the default) or its last
(``inclusive``). Each character becomes one token (``chars``), and the spans become one tag per
character (``tags``) in ``scheme`` (BIO, BIOES or BMES; ``tag_schemes.spans_to_tags``).

Overlapping spans cannot all be tagged; ``nested`` says what to do:

- ``error`` (default): a DataError naming both spans;
- ``outermost``: drop every span inside another; spans that cross (overlap, neither inside
  the other) stay an error;
- ``innermost``: drop every span that holds another; crossing spans stay an error;
- ``longest``: keep the longest spans first (ties: the earlier start, then file order),
  dropping any that overlaps one kept.

The same span given twice with the same label counts once; with two labels it is an error in
every mode but ``longest`` (which keeps the first). Every problem is a DataError naming the file
and line: bad JSON, a missing or mistyped field, an empty text, a span outside the text or
empty, a mention that differs from the text at its offsets.
"""
from __future__ import annotations

import json
from typing import Any, Iterator, Literal, NamedTuple, Optional

from multigrain.components.readers.base import FileReader
from multigrain.components.readers.files import read_json_objects, shorten
from multigrain.components.tag_schemes import check_scheme, spans_to_tags
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Reader

NESTED = ("error", "outermost", "innermost", "longest")
#: the fields looked for, in order, when ``spans_field`` is not set ("label": CLUENER)
DEFAULT_SPANS_FIELDS = ("spans", "entities", "label")


class Span(NamedTuple):
    """A labelled span, ``end`` exclusive; ``order``: its place in the line (for messages)."""

    label: str
    start: int
    end: int
    order: int

    def overlaps(self, other: "Span") -> bool:
        return self.start < other.end and other.start < self.end

    def inside(self, other: "Span") -> bool:
        return other.start <= self.start and self.end <= other.end

    def __str__(self) -> str:
        return f"{self.label} [{self.start}, {self.end})"


@Reader.register("jsonl_spans")
class JsonlSpansReader(FileReader):
    """JSON lines of a text and labelled character spans -> ``chars``, ``tags`` (see the module
    docstring for the layouts and options)."""

    def __init__(
        self,
        scheme: Literal["BIO", "BIOES", "BMES"] = "BIO",
        offsets: Literal["exclusive", "inclusive"] = "exclusive",
        nested: Literal["error", "outermost", "innermost", "longest"] = "error",
        text_field: str = "text",
        spans_field: Optional[str] = None,
        start_field: str = "start",
        end_field: str = "end",
        label_field: str = "label",
        mention_field: Optional[str] = "text",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.scheme = check_scheme(scheme)
        if offsets not in ("exclusive", "inclusive"):
            raise ConfigurationError(f"offsets must be 'exclusive' or 'inclusive', got {offsets!r}")
        if nested not in NESTED:
            raise ConfigurationError(f"nested must be one of {', '.join(map(repr, NESTED))}, got {nested!r}")
        self.offsets = offsets
        self.nested = nested
        self.text_field = text_field
        self.spans_fields = (spans_field,) if spans_field else DEFAULT_SPANS_FIELDS
        self.start_field, self.end_field, self.label_field = start_field, end_field, label_field
        self.mention_field = mention_field

    def _read(self, path: str) -> Iterator[Instance]:
        for number, record in read_json_objects(path):
            text = record.get(self.text_field)
            if not isinstance(text, str):
                raise DataError(path, number, f"expected a string field {self.text_field!r}, found "
                                              f"{_kind(text) if self.text_field in record else 'none'}")
            if not text.strip():
                raise DataError(path, number, f"empty {self.text_field!r}")
            spans = self._resolved(path, number, self._spans(path, number, record, text))
            tags = spans_to_tags(len(text), [(s.label, s.start, s.end - 1) for s in spans], self.scheme)
            yield Instance({"chars": list(text), "tags": tags}, source=(path, number))

    # the spans of one line -------------------------------------------------------------------
    def _spans(self, path: str, number: int, record: dict, text: str) -> list[Span]:
        field = next((f for f in self.spans_fields if f in record), None)
        if field is None:
            names = " or ".join(map(repr, self.spans_fields))
            raise DataError(path, number, f"expected a field {names} with the spans (an empty list when there are "
                                          f"none); set spans_field to the file's name for it")
        value = record[field]
        if isinstance(value, dict):  # CLUENER: {label: {mention: [[start, end], ...]}}
            items = []
            for label, mentions in value.items():
                if not isinstance(mentions, dict):
                    raise DataError(path, number, f"{field}.{shorten(label)}: expected an object mention -> "
                                                  f"[[start, end], ...], "
                                                  f"found {_kind(mentions)}")
                for mention, places in mentions.items():
                    if not isinstance(places, list) or not all(isinstance(p, list) and len(p) == 2 for p in places):
                        raise DataError(path, number, f"{field}.{shorten(label)}.{shorten(mention)}: expected a list "
                                                      f"of [start, end], "
                                                      f"found {shorten(json.dumps(places, ensure_ascii=False))}")
                    items += [(p[0], p[1], label, mention) for p in places]
        elif isinstance(value, list):
            items = [self._item(path, number, field, i, item) for i, item in enumerate(value)]
        else:
            raise DataError(path, number, f"{field!r}: expected a list of spans, found {_kind(value)}")
        spans = []
        for order, (start, end, label, mention) in enumerate(items):
            spans.append(self._span(path, number, text, order, start, end, label, mention))
        return spans

    def _item(self, path: str, number: int, field: str, i: int, item: Any) -> tuple:
        if isinstance(item, list):
            if len(item) != 3:
                raise DataError(path, number, f"{field}[{i}]: expected [start, end, label], found {len(item)} values")
            return item[0], item[1], item[2], None
        if not isinstance(item, dict):
            raise DataError(path, number, f"{field}[{i}]: expected a span object or [start, end, label], "
                                          f"found {_kind(item)}")
        for key in (self.start_field, self.end_field, self.label_field):
            if key not in item:
                raise DataError(path, number, f"{field}[{i}]: missing {key!r} (keys: "
                                              f"{', '.join(shorten(str(k)) for k in list(item)[:8])})")
        mention = item.get(self.mention_field) if self.mention_field else None
        return item[self.start_field], item[self.end_field], item[self.label_field], mention

    def _span(self, path: str, number: int, text: str, order: int, start: Any, end: Any, label: Any,
              mention: Any) -> Span:
        for name, value in (("start", start), ("end", end)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise DataError(path, number, f"span {order + 1}: {name} must be an integer, found {_kind(value)}")
        if not isinstance(label, str) or not label.strip() or any(c.isspace() for c in label):
            raise DataError(path, number, f"span {order + 1}: the label must be a non-empty string without spaces, "
                                          f"found {shorten(str(label))}")
        stop = end + 1 if self.offsets == "inclusive" else end
        given = f"[{start}, {end}{']' if self.offsets == 'inclusive' else ')'}"
        if not 0 <= start < stop <= len(text):
            problem = "is empty" if 0 <= start and stop <= start else f"is outside the text of {len(text)} characters"
            raise DataError(path, number, f"span {order + 1} ({shorten(label)} {given}, offsets: {self.offsets}) "
                                          f"{problem}")
        if mention is not None and text[start:stop] != mention:
            hint = ""
            if text[start:stop + 1] == mention:
                hint = " (the ends look inclusive: set offsets: 'inclusive')"
            elif text[start:stop - 1] == mention:
                hint = " (the ends look exclusive: set offsets: 'exclusive')"
            raise DataError(path, number, f"span {order + 1} ({shorten(label)} {given}): the text there is "
                                          f"{shorten(text[start:stop])}, the file gives {shorten(str(mention))}{hint}")
        return Span(label, start, stop, order)

    # overlaps --------------------------------------------------------------------------------
    def _resolved(self, path: str, number: int, spans: list[Span]) -> list[Span]:
        """The spans to tag: duplicates removed, overlaps resolved by ``nested``."""
        unique: dict[tuple[int, int], Span] = {}
        for span in spans:
            same = unique.get((span.start, span.end))
            if same is None:
                unique[(span.start, span.end)] = span
            elif same.label != span.label and self.nested != "longest":
                raise DataError(path, number, f"span {span.order + 1} ({span}) repeats span {same.order + 1} with "
                                              f"another label ({same.label})")
        spans = sorted(unique.values(), key=lambda s: s.order)
        if self.nested == "longest":
            kept: list[Span] = []
            for span in sorted(spans, key=lambda s: (s.start - s.end, s.start, s.order)):
                if not any(span.overlaps(k) for k in kept):
                    kept.append(span)
            return sorted(kept, key=lambda s: s.start)
        if self.nested == "outermost":
            spans = [s for s in spans if not any(s is not o and s.inside(o) for o in spans)]
        elif self.nested == "innermost":
            spans = [s for s in spans if not any(s is not o and o.inside(s) for o in spans)]
        ordered = sorted(spans, key=lambda s: (s.start, s.end))
        for a, b in zip(ordered, ordered[1:]):
            if a.overlaps(b):
                what = "crossing" if self.nested != "error" else "overlapping"
                raise DataError(path, number, f"{what} spans {a.order + 1} ({a}) and {b.order + 1} ({b}): one tag per "
                                              f"character cannot hold both; set nested: 'outermost', 'innermost' or "
                                              f"'longest' (now {self.nested!r})")
        return ordered


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {shorten(json.dumps(value, ensure_ascii=False), 30)}"
