"""``table`` against hand-written TSV, CSV and JSON-lines files: named and numbered columns,
classification and pair fields, label maps, unlabelled files, and bad input with its line."""
from __future__ import annotations

import pytest

from multigrain.components.readers.generic_tables import TableReader
from multigrain.components.readers.pair import BqCorpusReader
from multigrain.platform.errors import ConfigurationError, DataError


def write(tmp_path, text, name="data.tsv") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def read(path, **options):
    return list(TableReader(**options).read(path))


def error(path, **options) -> DataError:
    with pytest.raises(DataError) as caught:
        read(path, **options)
    return caught.value


PAIRS = 'sentence1\tsentence2\tlabel\n花呗怎么还款\t花呗如何还钱\t1\n\n"借呗"额度\tNBA赛程\t0\n'


def test_tsv_pairs_by_header_names_give_the_pair_fields(tmp_path):
    path = write(tmp_path, PAIRS)
    first, second = read(path, text_columns=["sentence1", "sentence2"])
    assert dict(first) == {"text_a": "花呗怎么还款", "text_b": "花呗如何还钱", "chars_a": list("花呗怎么还款"),
                           "chars_b": list("花呗如何还钱"), "label": "1"}
    assert first.source == (path, 2) and second.source == (path, 4)
    assert second["text_a"] == '"借呗"额度' and second["chars_b"] == ["NBA", "赛", "程"]  # quotes are text in TSV
    assert TableReader(text_columns=["sentence1", "sentence2"]).lattice_fields == BqCorpusReader.lattice_fields


def test_numbered_columns_without_header_and_a_label_map(tmp_path):
    path = write(tmp_path, "这家酒店很好\t1\n太差了\t0\n")
    good, bad = read(path, text_columns=[0], label_column=1, header=False, label_map={"0": "neg", "1": "pos"})
    assert dict(good) == {"text": "这家酒店很好", "chars": list("这家酒店很好"), "label": "pos"}
    assert bad["label"] == "neg"
    e = error(path, text_columns=[0], label_column=1, header=False, label_map={"1": "pos"})
    assert e.line == 2 and "label '0' is not in label_map (which names '1')" in str(e)


def test_csv_with_quotes_line_breaks_and_a_semicolon_delimiter(tmp_path):
    path = write(tmp_path, 'label,review\n1,"好,很好"\n0,"第一行\n第二行"\n1,不错\n', "data.csv")
    instances = read(path, format="csv", text_columns=["review"])
    assert [(x["text"], x["label"], x.source[1]) for x in instances] == [
        ("好,很好", "1", 2), ("第一行\n第二行", "0", 3), ("不错", "1", 5)]
    path = write(tmp_path, "t;l\n好;1\n", "semi.csv")
    assert read(path, format="csv", delimiter=";", text_columns=["t"], label_column="l")[0]["label"] == "1"


def test_json_lines_with_number_labels_and_an_unlabelled_file(tmp_path):
    path = write(tmp_path, '{"q1": "你好", "q2": "您好", "y": 1}\n\n{"q1": "吃了吗", "q2": "几点了", "y": 0}\n', "d.jsonl")
    first, second = read(path, format="jsonl", text_columns=["q1", "q2"], label_column="y")
    assert (first["label"], second["label"], second.source[1]) == ("1", "0", 3)
    unlabelled = read(path, format="jsonl", text_columns=["q1"], label_column=None)
    assert [dict(x) for x in unlabelled] == [{"text": "你好", "chars": ["你", "好"]}, {"text": "吃了吗", "chars": list("吃了吗")}]


@pytest.mark.parametrize("text, options, line, phrases", [
    (PAIRS, {"text_columns": ["s1", "sentence2"]}, 1, ["no column 's1' in the header row", "sentence1, sentence2, label"]),
    ("a\tlabel\n好\t1\t2\n", {"text_columns": ["a"]}, 2, ["expected 2 fields", "found 3"]),
    ("a\tlabel\n \t1\n", {"text_columns": ["a"]}, 2, ["empty text"]),
    ("a\tlabel\n好\t \n", {"text_columns": ["a"]}, 2, ["empty label"]),
    ("a\tb\tlabel\n好\t\t1\n", {"text_columns": ["a", "b"]}, 2, ["empty column 'b'"]),
    ("好\t1\n坏\t2\n", {"text_columns": [0], "label_column": 1, "header": False, "label_map": {"1": "pos"}},
     2, ["label '2' is not in label_map"]),
])
def test_bad_rows_name_their_line(tmp_path, text, options, line, phrases):
    path = write(tmp_path, text)
    e = error(path, **options)
    assert (e.path, e.line) == (path, line) and str(e).startswith(f"{path}:{line}: ")
    for phrase in phrases:
        assert phrase in str(e), str(e)


@pytest.mark.parametrize("text, line, phrases", [
    ('{"t": "好", "label": "1"}\n{"t": 3, "label": "1"}\n', 2, ["'t': expected a string, found int"]),
    ('{"t": "好", "label": "1"}\n{"text": "好", "label": "1"}\n', 2, ["no key 't'"]),
    ('{"t": "好", "label": "1"}\n{"t": "好", "label": \n', 2, ["bad JSON"]),
    ('{"t": "好", "label": "1"}\n["好", "1"]\n', 2, ["expected a JSON object"]),
])
def test_bad_json_lines_name_their_line(tmp_path, text, line, phrases):
    path = write(tmp_path, text, "d.jsonl")
    e = error(path, format="jsonl", text_columns=["t"])
    assert e.line == line, str(e)
    for phrase in phrases:
        assert phrase in str(e), str(e)


def test_bad_csv_bad_utf8_and_empty_files(tmp_path):
    e = error(write(tmp_path, 'text,label\n好,1\n"open,1\n', "bad.csv"), format="csv", text_columns=["text"])
    assert e.line == 3 and "bad CSV: unexpected end of data" in str(e)
    bad = tmp_path / "bad.tsv"
    bad.write_bytes("text\tlabel\n好\t1\n".encode() + b"\xc3(\t1\n")
    assert error(str(bad), text_columns=["text"]).line == 3
    bad_csv = tmp_path / "bad8.csv"
    bad_csv.write_bytes("text,label\n好,1\n".encode() + b"\xc3(,1\n")
    e = error(str(bad_csv), format="csv", text_columns=["text"])
    assert e.line == 3 and "not valid UTF-8" in str(e)
    assert "empty file" in str(error(write(tmp_path, "", "empty.tsv"), text_columns=["text"]))
    assert "no examples" in str(error(write(tmp_path, "text\tlabel\n", "header.tsv"), text_columns=["text"]))


@pytest.mark.parametrize("options", [
    {"text_columns": []},
    {"text_columns": ["a", "b", "c"]},
    {"text_columns": ["a"], "label_column": "a"},
    {"text_columns": ["a"], "header": False},
    {"text_columns": [0], "format": "jsonl"},
    {"text_columns": ["a"], "format": "csv", "delimiter": "||"},
    {"text_columns": ["a"], "format": "xlsx"},
    {"text_columns": [-1]},
])
def test_bad_options(options):
    with pytest.raises(ConfigurationError):
        TableReader(**options)
