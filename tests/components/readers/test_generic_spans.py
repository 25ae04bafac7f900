"""``jsonl_spans`` against hand-written JSON-lines files: the three span layouts, both offset
conventions, every ``nested`` option, each scheme, and every bad-input case naming its line."""
from __future__ import annotations

import json
import random

import pytest

from multigrain.components.readers.generic_spans import JsonlSpansReader
from multigrain.components.tag_schemes import SCHEMES, extract_spans, spans_to_tags
from multigrain.platform.config import build
from multigrain.platform.errors import ConfigurationError, DataError, SpecError
from multigrain.platform.kinds import Reader

TEXT = "张三在北京大学工作"  # 张三 PER [0,2), 北京大学 ORG [3,7), 北京 LOC [3,5)


def jsonl(tmp_path, *records, name="data.jsonl") -> str:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def read(path, **options):
    return list(JsonlSpansReader(**options).read(path))


def error(path, **options) -> DataError:
    with pytest.raises(DataError) as caught:
        read(path, **options)
    return caught.value


def span(start, end, label, **more):
    return {"start": start, "end": end, "label": label, **more}


@pytest.mark.parametrize("scheme, tags", [
    ("BIO", ["B-PER", "I-PER", "O", "B-ORG", "I-ORG", "I-ORG", "I-ORG", "O", "B-X"]),
    ("BIOES", ["B-PER", "E-PER", "O", "B-ORG", "I-ORG", "I-ORG", "E-ORG", "O", "S-X"]),
    ("BMES", ["B-PER", "E-PER", "O", "B-ORG", "M-ORG", "M-ORG", "E-ORG", "O", "S-X"]),
])
def test_object_spans_become_tags_of_the_scheme(tmp_path, scheme, tags):
    path = jsonl(tmp_path, {"text": TEXT, "spans": [span(3, 7, "ORG", text="北京大学"), span(0, 2, "PER"), span(8, 9, "X")]})
    [instance] = read(path, scheme=scheme)
    assert instance["chars"] == list(TEXT)
    assert instance["tags"] == tags
    assert instance.source == (path, 1)


def test_inclusive_ends_list_layout_entities_field_and_blank_lines(tmp_path):
    path = jsonl(tmp_path, {"text": "我爱北京", "entities": [[2, 3, "LOC"]]}, "",
                 {"text": "无实体", "entities": []})
    first, second = read(path, offsets="inclusive")
    assert first["tags"] == ["O", "O", "B-LOC", "I-LOC"]
    assert second["tags"] == ["O", "O", "O"] and second.source == (path, 3)


def test_cluener_layout_is_read_with_its_mentions_checked(tmp_path):
    line = {"text": "浙商银行企业信贷部叶老桂博士",
            "label": {"name": {"叶老桂": [[9, 11]]}, "company": {"浙商银行": [[0, 3]]}}}
    [instance] = read(jsonl(tmp_path, line), offsets="inclusive", scheme="BIOES")
    assert extract_spans(instance["tags"], "BIOES") == [("company", 0, 3), ("name", 9, 11)]
    bad = dict(line, label={"name": {"叶老": [[9, 11]]}})
    e = error(jsonl(tmp_path, bad, name="bad.jsonl"), offsets="inclusive")
    assert e.line == 1 and "'叶老桂'" in str(e) and "'叶老'" in str(e)


NESTED = {"text": TEXT, "spans": [span(3, 7, "ORG"), span(3, 5, "LOC"), span(0, 2, "PER")]}


@pytest.mark.parametrize("nested, expected", [
    ("outermost", [("PER", 0, 1), ("ORG", 3, 6)]),
    ("innermost", [("PER", 0, 1), ("LOC", 3, 4)]),
    ("longest", [("PER", 0, 1), ("ORG", 3, 6)]),
])
def test_nested_options(tmp_path, nested, expected):
    [instance] = read(jsonl(tmp_path, NESTED), nested=nested, scheme="BIOES")
    assert extract_spans(instance["tags"], "BIOES") == expected


def test_overlap_is_an_error_by_default_naming_both_spans(tmp_path):
    path = jsonl(tmp_path, {"text": "好", "spans": []}, NESTED)
    e = error(path)
    assert e.line == 2 and "overlapping spans" in str(e)
    assert "ORG [3, 7)" in str(e) and "LOC [3, 5)" in str(e) and "nested" in str(e)


def test_crossing_spans_stay_an_error_under_outermost_and_longest_resolves_them(tmp_path):
    crossing = {"text": TEXT, "spans": [span(3, 6, "A"), span(4, 8, "B")]}
    for nested in ("outermost", "innermost"):
        assert "crossing spans" in str(error(jsonl(tmp_path, crossing), nested=nested))
    [instance] = read(jsonl(tmp_path, crossing), nested="longest")
    assert extract_spans(instance["tags"], "BIO") == [("B", 4, 7)]  # the longer one


def test_a_repeated_span_counts_once_and_two_labels_for_one_span_are_an_error(tmp_path):
    [instance] = read(jsonl(tmp_path, {"text": "北京", "spans": [span(0, 2, "LOC"), span(0, 2, "LOC")]}))
    assert instance["tags"] == ["B-LOC", "I-LOC"]
    e = error(jsonl(tmp_path, {"text": "北京", "spans": [span(0, 2, "LOC"), span(0, 2, "ORG")]}, name="b.jsonl"),
              nested="outermost")
    assert e.line == 1 and "another label" in str(e)


@pytest.mark.parametrize("record, options, phrases", [
    ({"text": "北京", "spans": [span(1, 3, "LOC")]}, {}, ["outside the text of 2 characters"]),
    ({"text": "北京", "spans": [span(-1, 1, "LOC")]}, {}, ["outside the text"]),
    ({"text": "北京", "spans": [span(1, 1, "LOC")]}, {}, ["is empty"]),
    ({"text": "北京", "spans": [span(0, 2, "LOC")]}, {"offsets": "inclusive"}, ["[0, 2]", "outside the text"]),
    ({"text": "北京", "spans": [span(0, 1, "LOC", text="北京")]}, {}, ["the text there is '北'", "offsets: 'inclusive'"]),
    ({"text": "北京", "spans": [span(0, 1, "LOC", text="北")]}, {"offsets": "inclusive"}, ["'北京'", "'exclusive'"]),
    ({"text": "北京", "spans": [span("0", 1, "LOC")]}, {}, ["start must be an integer"]),
    ({"text": "北京", "spans": [span(0, 1, "L C")]}, {}, ["label must be a non-empty string without spaces"]),
    ({"text": "北京", "spans": [{"start": 0, "label": "LOC"}]}, {}, ["missing 'end'"]),
    ({"text": "北京", "spans": [[0, 1]]}, {}, ["expected [start, end, label]"]),
    ({"text": "北京", "spans": "LOC"}, {}, ["expected a list of spans"]),
    ({"text": "北京"}, {}, ["expected a field 'spans' or 'entities' or 'label'"]),
    ({"text": "北京", "spans": []}, {"spans_field": "mentions"}, ["expected a field 'mentions'"]),
    ({"text": "  ", "spans": []}, {}, ["empty 'text'"]),
    ({"sentence": "北京", "spans": []}, {}, ["expected a string field 'text', found none"]),
    ('{"text": "北京", "spans": [}', {}, ["bad JSON"]),
    ('["北京"]', {}, ["expected a JSON object, found list"]),
])
def test_bad_lines_name_their_line(tmp_path, record, options, phrases):
    path = jsonl(tmp_path, {"text": "好", "spans": [], "mentions": []}, record)
    e = error(path, **options)
    assert (e.path, e.line) == (path, 2) and str(e).startswith(f"{path}:2: ")
    for phrase in phrases:
        assert phrase in str(e), str(e)


def test_custom_field_names(tmp_path):
    record = {"sentence": "去上海", "mentions": [{"b": 1, "e": 3, "type": "LOC", "surface": "上海"}]}
    [instance] = read(jsonl(tmp_path, record), text_field="sentence", spans_field="mentions", start_field="b",
                      end_field="e", label_field="type", mention_field="surface")
    assert instance["tags"] == ["O", "B-LOC", "I-LOC"]


def test_bad_utf8_and_empty_files(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes('{"text": "好", "spans": []}\n'.encode() + b'{"text": "\xff", "spans": []}\n')
    e = error(str(path))
    assert e.line == 2 and "not valid UTF-8" in str(e)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert "empty file" in str(error(str(empty)))


class Holder:
    def __init__(self, reader: Reader):
        self.reader = reader


def test_options_are_checked_when_the_spec_is_built(tmp_path):
    with pytest.raises(SpecError) as caught:
        build(Holder, {"reader": {"type": "jsonl_spans", "offsets": "half-open", "nested": "all", "split": "val"}})
    assert [p.path for p in caught.value.problems] == ["reader.offsets", "reader.nested", "reader.split"]
    with pytest.raises(ConfigurationError):
        JsonlSpansReader(scheme="IOB1")
    reader = build(Holder, {"reader": {"type": "jsonl_spans", "scheme": "BMES", "nested": "innermost",
                                       "split": "dev"}}).reader
    assert isinstance(reader, JsonlSpansReader) and reader.scheme == "BMES" and reader.split == "dev"


def test_spans_to_tags_inverts_extract_spans():
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(1, 12)
        spans, at = [], rng.randint(0, 2)
        while at < n:
            end = min(n - 1, at + rng.randint(0, 3))
            spans.append((rng.choice("AB"), at, end))
            at = end + 1 + rng.randint(0, 2)
        for scheme in SCHEMES:
            tags = spans_to_tags(n, spans, scheme)
            assert len(tags) == n and extract_spans(tags, scheme) == spans
    with pytest.raises(ValueError):
        spans_to_tags(3, [("A", 0, 1), ("B", 1, 2)], "BIO")
