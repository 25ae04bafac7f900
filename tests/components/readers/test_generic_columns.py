"""``conll`` against hand-written column files: separators, columns, schemes, ``-DOCSTART-``,
comments, multi-character tokens, scheme breaks warned with their line, bad input with its line."""
from __future__ import annotations

import warnings

import pytest

from multigrain.components.readers.generic_columns import ConllReader, spread_tag
from multigrain.components.tag_schemes import SCHEMES, extract_spans, ill_formed_positions
from multigrain.platform.errors import ConfigurationError, DataError


def write(tmp_path, text, name="data.conll") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def read(path, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        instances = list(ConllReader(**options).read(path))
    return instances, [str(w.message) for w in caught]


def error(path, **options) -> DataError:
    with pytest.raises(DataError) as caught:
        read(path, **options)
    return caught.value


CONLL03 = """-DOCSTART- -X- -X- O

张 NR B-NP B-PER
三 NR I-NP I-PER
在 P B-PP O
北 NR B-NP B-LOC
京 NR I-NP I-LOC

我 PN B-NP O
"""


def test_conll2003_columns_docstart_and_the_last_sentence_without_a_blank_line(tmp_path):
    path = write(tmp_path, CONLL03)
    (first, second), warned = read(path)
    assert first["chars"] == list("张三在北京") and first["tags"] == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]
    assert first.source == (path, 3) and second.source == (path, 9)
    assert second["chars"] == ["我"] and second["tags"] == ["O"] and warned == []
    (first, _), _ = read(path, tag_column=2, scheme="BIO")  # another column: the chunk tags
    assert first["tags"][:3] == ["B-NP", "I-NP", "B-PP"]


def test_tab_delimiter_keeps_spaces_inside_a_column(tmp_path):
    path = write(tmp_path, "a b\tS-X\n中\tO\n")
    [instance], _ = read(path, delimiter="\t", scheme="BIOES")
    assert instance["chars"] == ["a b", "中"] and instance["tags"] == ["S-X", "O"]
    e = error(path)  # split at any whitespace: 3 columns, then 2
    assert e.line == 2 and "expected 3 columns" in str(e) and "as on line 1" in str(e)


def test_comments_before_a_sentence_are_skipped_but_a_hash_token_is_read(tmp_path):
    text = "# sent_id = 1\n# text = 北京\n北\tB-LOC\n京\tE-LOC\n\n#\tO\n好\tO\n"
    (first, second), _ = read(write(tmp_path, text), scheme="BIOES")
    assert first["chars"] == ["北", "京"] and first.source[1] == 3
    assert second["chars"] == ["#", "好"]
    with pytest.raises(DataError):
        read(write(tmp_path, text, "b.conll"), scheme="BIOES", comment_prefix=None)


@pytest.mark.parametrize("scheme, tags", [
    ("BIO", ["B-ORG", "I-ORG", "I-ORG", "I-ORG", "O", "B-LOC", "I-LOC"]),
    ("BIOES", ["B-ORG", "I-ORG", "I-ORG", "E-ORG", "O", "B-LOC", "E-LOC"]),
    ("BMES", ["B-ORG", "M-ORG", "M-ORG", "E-ORG", "O", "B-LOC", "E-LOC"]),
])
def test_multi_character_tokens_keep_split_or_error(tmp_path, scheme, tags):
    single = {"BIO": "B-LOC", "BIOES": "S-LOC", "BMES": "S-LOC"}[scheme]
    first, last = ("B-ORG", "I-ORG") if scheme == "BIO" else ("B-ORG", "E-ORG")
    path = write(tmp_path, f"北京\t{first}\n大学\t{last}\n在\tO\n上海\t{single}\n")
    [kept], _ = read(path, scheme=scheme)
    assert kept["chars"] == ["北京", "大学", "在", "上海"] and len(kept["tags"]) == 4
    [split], warned = read(path, scheme=scheme, multi_char_tokens="split")
    assert split["chars"] == list("北京大学在上海") and split["tags"] == tags and warned == []
    assert extract_spans(split["tags"], scheme) == [("ORG", 0, 3), ("LOC", 5, 6)]
    e = error(path, scheme=scheme, multi_char_tokens="error")
    assert e.line == 1 and "a token of 2 characters" in str(e)


def test_spread_tag_gives_well_formed_entities_in_every_scheme():
    for scheme in SCHEMES:
        for prefix in ("B", "S") if scheme != "BIO" else ("B",):
            for n in (1, 2, 5):
                tags = spread_tag(f"{prefix}-X", n, scheme)
                if prefix == "B" and scheme != "BIO":
                    tags = tags + spread_tag("E-X", 1, scheme)
                assert ill_formed_positions(tags, scheme) == [] and len(extract_spans(tags, scheme)) == 1


def test_scheme_breaks_are_read_and_warned_with_their_line(tmp_path):
    path = write(tmp_path, "甲\tO\n乙\tI-PER\n\n丙\tB-PER\n")
    instances, warned = read(path)
    assert [x["tags"] for x in instances] == [["O", "I-PER"], ["B-PER"]]
    assert warned == [f"{path}:2: tag 'I-PER' after 'O' ending the sentence breaks the BIO scheme; read as is"]
    _, warned = read(write(tmp_path, "丙\tB-PER\n", "b.conll"), scheme="BIOES")
    assert len(warned) == 1 and ":1: tag 'B-PER'" in warned[0]


@pytest.mark.parametrize("text, options, line, phrases", [
    ("甲\tO\n乙\tM-PER\n", {}, 2, ["unknown tag 'M-PER'", "BIO scheme", "B-/I-TYPE"]),
    ("甲\tO\n乙\tPER\n", {}, 2, ["unknown tag 'PER'"]),
    ("甲 X O\n乙 O\n", {}, 2, ["expected 3 columns"]),
    ("甲\tO\n乙\n", {"delimiter": "\t"}, 2, ["expected 2 columns"]),
    ("甲\tO\n\tO\n", {"delimiter": "\t"}, 2, ["empty token"]),
    ("甲\tO\n乙\tO\n", {"token_column": 3, "tag_column": 1}, 1, ["token_column 3"]),
    ("甲\tO\n\x07\tO\n", {"delimiter": "\t"}, 2, ["control character U+0007"]),
])
def test_bad_lines_name_their_line(tmp_path, text, options, line, phrases):
    path = write(tmp_path, text)
    e = error(path, **options)
    assert (e.path, e.line) == (path, line) and str(e).startswith(f"{path}:{line}: ")
    for phrase in phrases:
        assert phrase in str(e), str(e)


def test_bad_utf8_empty_file_and_options(tmp_path):
    path = tmp_path / "bad.conll"
    path.write_bytes("甲\tO\n\n".encode() + b"\xe4\xb9\tO\n")
    e = error(str(path))
    assert e.line == 3 and "not valid UTF-8" in str(e)
    assert "empty file" in str(error(write(tmp_path, "", "empty.conll")))
    assert "no examples" in str(error(write(tmp_path, "-DOCSTART- O\n\n", "doc.conll")))
    bad_options = ({"scheme": "IO"}, {"delimiter": ""}, {"multi_char_tokens": "drop"}, {"token_column": 1, "tag_column": 1})
    for options in bad_options:
        with pytest.raises(ConfigurationError):
            ConllReader(**options)
