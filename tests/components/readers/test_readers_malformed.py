"""Malformed input: each case is a tiny temp file; the DataError names the file, the line and the
problem. Scheme breaks are read and warned about with their line."""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from multigrain.components.readers.classification import ChnSentiCorpReader, ThucNewsTitlesReader
from multigrain.components.readers.mrc import Cmrc2018Reader
from multigrain.components.readers.ner import MsraNerReader, ResumeNerReader, WeiboNerReader
from multigrain.components.readers.nist import NistReader
from multigrain.components.readers.pair import BqCorpusReader
from multigrain.components.readers.raw_text import RawTextReader
from multigrain.components.readers.translation import TatoebaReader, WmtNewstestReader
from multigrain.platform.errors import DataError

NIST = Path(__file__).resolve().parents[2] / "fixtures" / "readers" / "nist"


def write(tmp_path, name, content) -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def error_of(reader, path) -> DataError:
    with pytest.raises(DataError) as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            list(reader.read(path))
    return caught.value


def assert_error(reader, path, line, *phrases):
    error = error_of(reader, path)
    assert error.path == path and error.line == line, str(error)
    assert str(error).startswith(f"{path}:{line}: " if line is not None else f"{path}: ")
    for phrase in phrases:
        assert phrase in str(error), str(error)
    return error


def read_quietly(reader, path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        instances = list(reader.read(path))
    return instances, [str(w.message) for w in caught]


# ---------------------------------------------------------------- NER


def test_bmes_bad_column_count(tmp_path):
    path = write(tmp_path, "a.bmes", "中 B-ORG\n国 E-ORG\n\n人 O 多\n")
    assert_error(ResumeNerReader(), path, 4, "expected 2 columns", "found 3 columns")
    assert "人" not in str(error_of(ResumeNerReader(), path))  # the line is named, never shown


def test_bmes_char_without_tag_is_a_count_mismatch(tmp_path):
    path = write(tmp_path, "a.bmes", "中 B-ORG\n国\n")
    assert_error(ResumeNerReader(), path, 2, "expected 2 columns (character SPACE tag)", "found 1")
    assert "holds a TAB" not in str(error_of(ResumeNerReader(), path))


def test_a_tab_separated_file_read_as_bmes_says_which_separator_it_holds(tmp_path):
    path = write(tmp_path, "a.bmes", "中\tB-ORG\n国\tE-ORG\n")
    assert_error(ResumeNerReader(), path, 1, "found 1 column (the line holds a TAB; this reader's columns are "
                                             "separated by one SPACE)")


def test_bmes_unknown_tag(tmp_path):
    path = write(tmp_path, "a.bmes", "中 O\n\n国 X-ORG\n")
    assert_error(ResumeNerReader(), path, 3, "unknown tag 'X-ORG'")
    path = write(tmp_path, "b.bmes", "中 I-ORG\n")  # I is not a BMES prefix
    assert_error(ResumeNerReader(), path, 1, "unknown tag 'I-ORG'")


def test_last_sentence_without_blank_line_is_read(tmp_path):
    path = write(tmp_path, "a.bmes", "中 B-LOC\n国 E-LOC\n\n\n\n人 S-PER\n多 O")  # no final newline either
    instances, messages = read_quietly(ResumeNerReader(), path)
    assert [(i["chars"], i["tags"], i.source[1]) for i in instances] == [
        (["中", "国"], ["B-LOC", "E-LOC"], 1), (["人", "多"], ["S-PER", "O"], 6)]
    assert messages == []
    path = write(tmp_path, "w.conll", "科0\tO\n\n技1\tB-ORG.NAM")
    assert [i["chars"] for i in WeiboNerReader().read(path)] == [["科"], ["技"]]


def test_bmes_scheme_break_is_read_and_warned_with_its_line(tmp_path):
    path = write(tmp_path, "a.bmes", "中 O\n国 M-LOC\n人 E-LOC\n\n多 B-PER\n")
    with pytest.warns(UserWarning) as caught:
        instances = list(ResumeNerReader().read(path))
    messages = [str(w.message) for w in caught]
    assert instances[0]["tags"] == ["O", "M-LOC", "E-LOC"]  # as is
    assert messages == [
        f"{path}:2: tag 'M-LOC' after 'O' breaks the BMES scheme; read as is",
        f"{path}:5: the sentence ends inside an entity (last tag 'B-PER') breaks the BMES scheme; read as is",
    ]


def test_bio_i_after_o_is_read_and_warned_once_per_sentence(tmp_path, monkeypatch):
    content = "我0\tO\n爱1\tI-PER.NAM\n你2\tI-PER.NAM\n他3\tO\n们4\tI-PER.NOM\n\n好0\tB-LOC.NAM\n"
    path = write(tmp_path, "w.conll", content)
    with pytest.warns(UserWarning) as caught:
        instances = list(WeiboNerReader().read(path))
    assert [str(w.message) for w in caught] == [
        f"{path}:2: tag 'I-PER.NAM' after 'O' breaks the BIO scheme; read as is"]
    assert instances[0]["tags"] == ["O", "I-PER.NAM", "I-PER.NAM", "O", "I-PER.NOM"]
    # the command line prints it as one line, not Python's "ner.py:112: UserWarning: ..." and a source line
    from multigrain.platform.commands import _plain_warnings

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    _plain_warnings()
    w = caught[0]
    assert warnings.formatwarning(w.message, w.category, w.filename, w.lineno) == \
        f"warning: {path}:2: tag 'I-PER.NAM' after 'O' breaks the BIO scheme; read as is\n"
    path = write(tmp_path, "x.conll", "你0\tB-PER.NAM\n们1\tI-PER.NOM\n")  # type change inside a mention
    with pytest.warns(UserWarning, match=r"x\.conll:2: tag 'I-PER\.NOM' after 'B-PER\.NAM'"):
        list(WeiboNerReader().read(path))


def test_weibo_tokens_tags_and_entity_kinds(tmp_path):
    path = write(tmp_path, "w.conll", "张0\tB-PER.NAM\n三1\tI-PER.NAM\n310\tO\n老0\tB-PER.NOM\n师1\tI-PER.NOM\n")
    [both] = WeiboNerReader().read(path)
    [named] = WeiboNerReader(entity_kind="NAM").read(path)
    [nominal] = WeiboNerReader(entity_kind="NOM").read(path)
    assert both["chars"] == ["张", "三", "3", "老", "师"]
    assert named["tags"] == ["B-PER", "I-PER", "O", "O", "O"]
    assert nominal["tags"] == ["O", "O", "O", "B-PER", "I-PER"]


@pytest.mark.parametrize(
    "line, phrases",
    [("张0\tB-PER\n", ["unknown tag 'B-PER'", ".NAM or .NOM"]),
     ("张0\tS-PER.NAM\n", ["unknown tag 'S-PER.NAM'"]),
     ("张\tO\n", ["expected a character followed by its position digit", "'张'"]),
     ("张0 O\n", ["expected 2 columns (character TAB tag)", "found 1 column (the line holds a SPACE; this reader's "
                                                         "columns are separated by one TAB)"]),
     ("中国人民0\tB-ORG.NAM\n", ["expected a character followed by its position digit(s), found '中国人民0'"]),
     ("\x0b0\tO\n", ["a control character U+000B in the character column"]),
     (" 0\tO\n", ["a space in the character column"])],
)
def test_weibo_malformed_lines(tmp_path, line, phrases):
    path = write(tmp_path, "w.conll", "好0\tO\n" + line)
    assert_error(WeiboNerReader(), path, 2, *phrases)


def test_msra_sighan_unknown_tag_and_missing_slash(tmp_path):
    path = write(tmp_path, "s.txt", "中国/ns 很/o 大/o \n北京/nz 是/o \n")
    assert_error(MsraNerReader(), path, 2, "unknown tag 'nz'", "'北京/nz'")
    path = write(tmp_path, "t.txt", "中国/ns 很/o\n\n北京 是/o\n")
    assert_error(MsraNerReader(), path, 3, "expected space-separated text/tag chunks", "'北京'")


def test_weibo_keeps_its_mangled_emoji_as_one_token(tmp_path):
    path = write(tmp_path, "w.conll", "\ufffd\ufffd0\tO\n好1\tO\n")
    [instance] = WeiboNerReader().read(path)
    assert instance["chars"] == ["\ufffd\ufffd", "好"] and instance["tags"] == ["O", "O"]


@pytest.mark.parametrize("text, phrase", [("中\x0b国/o 人/nr \n", "a control character U+000B in the text of chunk "
                                                                    "'中\\x0b国/o'"),
                                          ("中\t国/o 人/nr \n", "a control character U+0009 in the text of chunk")])
def test_msra_sighan_chunks_hold_text_characters(tmp_path, text, phrase):
    path = write(tmp_path, "s.txt", "中国/ns 很/o \n" + text)
    assert_error(MsraNerReader(), path, 2, phrase)


def test_msra_sighan_conversion_and_split_options(tmp_path):
    path = write(tmp_path, "s.txt", "在/o 中华人民共和国/ns 的/o 周/nr 恩来/nr 和/o 新华社/nt \n")
    [instance] = MsraNerReader().read(path)
    assert "".join(instance["chars"]) == "在中华人民共和国的周恩来和新华社"
    assert instance["tags"] == (["O", "B-NS"] + ["M-NS"] * 5 + ["E-NS", "O", "S-NR", "B-NR", "E-NR", "O"]
                                + ["B-NT", "M-NT", "E-NT"])
    dev = list(MsraNerReader(split="dev", dev_fraction=1.0).read(path))
    train = list(MsraNerReader(split="train", dev_fraction=1.0).read(path))
    assert (len(dev), len(train)) == (1, 0)


# ---------------------------------------------------------------- every reader: empty file, bad UTF-8

READERS = [
    (ResumeNerReader, "a.bmes", "中 O\n国 O\n\n{bad} O\n"),
    (WeiboNerReader, "a.conll", "中0\tO\n国1\tO\n\n{bad}0\tO\n"),
    (MsraNerReader, "a.txt", "中国/ns \n很/o \n\n{bad}/o \n"),
    (ChnSentiCorpReader, "a.tsv", "label\ttext_a\n1\t好\n\n0\t{bad}\n"),
    (ThucNewsTitlesReader, "a.txt", "标题\t1\n标题\t2\n\n{bad}\t3\n"),
    (BqCorpusReader, "a.txt", "你好_!_您好_!_1\n再见_!_拜拜_!_1\n\n{bad}_!_拜拜_!_1\n"),
    (TatoebaReader, "a.txt", "Hi.\t嗨。\tCC\nRun.\t跑。\tCC\n\nGo.\t{bad}\tCC\n"),
    (WmtNewstestReader, "a.csv", "0,1\n你好,Hello\n\"再见,\",\"Bye\"\n{bad},x\n"),
    (RawTextReader, "a.txt", "一\n二\n\n{bad}\n"),
    (Cmrc2018Reader, "a.json", '{"data": [\n{"paragraphs": []},\n\n"{bad}"]}'),
    (NistReader, "a.src.sgm", '<srcset>\n<doc docid="d">\n\n<seg id=1>{bad}</seg></doc></srcset>\n'),
]


@pytest.mark.parametrize("cls, name, template", READERS, ids=[r[0].__name__ for r in READERS])
def test_non_utf8_byte_names_its_line(tmp_path, cls, name, template):
    good, bad = template.split("{bad}")
    path = write(tmp_path, name, good.encode("utf-8") + b"\xff\xfe" + bad.encode("utf-8"))
    reader = cls(references=[]) if cls is NistReader else cls()
    assert_error(reader, path, 4, "not valid UTF-8", "b'\\xff")


@pytest.mark.parametrize("cls", [r[0] for r in READERS], ids=[r[0].__name__ for r in READERS])
def test_empty_file(tmp_path, cls):
    path = write(tmp_path, "empty.src.sgm", b"")
    reader = cls(references=[]) if cls is NistReader else cls()
    assert_error(reader, path, None, "empty file")


@pytest.mark.parametrize("cls, name, template", READERS, ids=[r[0].__name__ for r in READERS])
def test_a_nul_character_names_its_line(tmp_path, cls, name, template):
    path = write(tmp_path, name, template.replace("{bad}", "\0"))
    reader = {NistReader: lambda: cls(references=[]), MsraNerReader: lambda: cls(format="sighan")}.get(cls, cls)()
    assert_error(reader, path, 4, "a NUL character", "not a text file")


@pytest.mark.parametrize("cls, name, template", [r for r in READERS if r[0] not in (Cmrc2018Reader, NistReader)],
                         ids=[r[0].__name__ for r in READERS if r[0] not in (Cmrc2018Reader, NistReader)])
def test_an_over_long_line_names_its_line(tmp_path, cls, name, template):
    from multigrain.components.readers.files import MAX_LINE_CHARS

    path = write(tmp_path, name, template.replace("{bad}", "长" * (MAX_LINE_CHARS + 1)))
    reader = cls(format="sighan") if cls is MsraNerReader else cls()
    limit = "field larger than field limit" if cls is WmtNewstestReader else f"the longest a reader accepts is {MAX_LINE_CHARS:,}"
    assert_error(reader, path, 4, limit)


def test_character_columns_hold_one_character_and_no_control_character(tmp_path):
    path = write(tmp_path, "two.bmes", "中 O\n国家 O\n")
    assert_error(ResumeNerReader(), path, 2, "expected one character in the character column, found 2: '国家'")
    path = write(tmp_path, "big.bmes", "中 O\n" + "长" * 1_100_000 + " O\n")  # within the bytes held
    assert_error(ResumeNerReader(), path, 2, "a line of 1,100,002 characters")
    path = write(tmp_path, "bigger.bmes", "中 O\n" + "长" * 2_000_000 + " O\n")  # 6 MB: refused after 4 MB
    assert_error(ResumeNerReader(), path, 2, "a line of more than 1,000,000 characters")
    path = write(tmp_path, "long.bmes", "中 O\n" + "长" * 500 + " O\n")
    assert_error(ResumeNerReader(), path, 2, "found 500")
    path = write(tmp_path, "ctrl.bmes", "中 O\n\x07 O\n")
    assert_error(ResumeNerReader(), path, 2, "a control character U+0007 in the character column")


def test_free_text_keeps_other_control_characters(tmp_path):
    """The documented policy: BQ's own training file holds backspaces; they are read as they are."""
    path = write(tmp_path, "bq.txt", "你\x08好_!_您好_!_1\n")
    (instance,) = list(BqCorpusReader().read(path))
    assert "\x08" in "".join(instance["chars_a"]) or "\x08" in instance.get("text_a", "")


def test_bad_utf8_far_into_a_long_file(tmp_path):
    lines = [f"{chr(0x4E00 + i % 100)} O\n\n" for i in range(5000)]
    content = "".join(lines).encode("utf-8")
    path = write(tmp_path, "long.bmes", content + b"\xc3\x28 O\n")
    assert_error(ResumeNerReader(), path, 10001, "not valid UTF-8")


def test_whitespace_only_file_has_no_examples(tmp_path):
    path = write(tmp_path, "blank.bmes", "\n  \n\n")
    assert_error(ResumeNerReader(), path, None, "no examples")


def test_missing_file(tmp_path):
    assert_error(RawTextReader(), str(tmp_path / "nope.txt"), None, "no such file")


# ---------------------------------------------------------------- sentence-level formats


def test_bq_with_two_fields(tmp_path):
    path = write(tmp_path, "bq.txt", "你好_!_您好_!_1\n你好\t您好_!_1\n")
    assert_error(BqCorpusReader(), path, 2, "expected 3 fields separated by '_!_'", "found 2")
    path = write(tmp_path, "bq2.txt", "你好_!_您好_!_1_!_0\n")
    assert_error(BqCorpusReader(), path, 1, "found 4")
    path = write(tmp_path, "bq3.txt", "你好_!__!_1\n")
    assert_error(BqCorpusReader(), path, 1, "empty sentence2")


def test_chnsenticorp_header_and_columns(tmp_path):
    path = write(tmp_path, "a.tsv", "label\ttext\n1\t好\n")
    assert_error(ChnSentiCorpReader(), path, 1, "expected a header row of TAB-separated column names label and "
                                                "text_a; the first line (2 columns) names no text_a")
    path = write(tmp_path, "b.tsv", "label\ttext_a\n1\t好\n0\t坏\t多\n")
    assert_error(ChnSentiCorpReader(), path, 3, "expected 2 TAB-separated columns, found 3")
    path = write(tmp_path, "c.tsv", "text_a\tlabel\n好\t1\n")  # columns found by name
    [instance] = ChnSentiCorpReader().read(path)
    assert (instance["text"], instance["label"], instance.source[1]) == ("好", "1", 2)


def test_thucnews_class_id_out_of_range(tmp_path):
    write(tmp_path, "class.txt", "finance\nrealty")
    path = write(tmp_path, "dev.txt", "涨停\t0\n楼市\t2\n")
    assert_error(ThucNewsTitlesReader(), path, 2, "class id '2' is not one of 0..1")


def test_thucnews_class_ids_and_class_names(tmp_path):
    write(tmp_path, "class.txt", "finance\nrealty")
    path = write(tmp_path, "dev.txt", "涨停\t0\n楼市\t" + "1" * 5000 + "\n")  # more digits than int() takes
    assert_error(ThucNewsTitlesReader(), path, 2, "class id '11111", "is not one of 0..1")
    write(tmp_path, "class.txt", "finance\n\nrealty\nfinance\n")
    path = write(tmp_path, "dev.txt", "涨停\t0\n")
    error = error_of(ThucNewsTitlesReader(), path)
    assert str(error) == f"{tmp_path / 'class.txt'}:4: class name 'finance' again (line 1 has it): two ids would be " \
                         f"one label"
    write(tmp_path, "class.txt", "\n \n")
    assert str(error_of(ThucNewsTitlesReader(), path)) == f"{tmp_path / 'class.txt'}: no class names (line i names " \
                                                          f"class id i)"


def test_tatoeba_bom_and_bad_field_count(tmp_path):
    path = write(tmp_path, "cmn.txt", "\ufeffHi.\t嗨。\tCC-BY\n\n")
    [instance] = TatoebaReader().read(path)
    assert instance["source"] == "嗨。" and instance["references"] == ["Hi."] and instance["chars"] == ["嗨", "。"]
    path = write(tmp_path, "bad.txt", "Hi.\t嗨。\tCC\nRun.\n")
    assert_error(TatoebaReader(), path, 2, "expected 3 TAB-separated fields", "found 1")


def test_wmt_csv_header_fields_and_quotes(tmp_path):
    path = write(tmp_path, "a.csv", "zh,en\n你好,Hello\n")
    assert_error(WmtNewstestReader(), path, 1, "expected the header row '0,1'")
    path = write(tmp_path, "b.csv", '0,1\n"你好,世界","Hello, ""world"""\n"多\n行",x\n再见,Bye,extra\n')
    error = assert_error(WmtNewstestReader(), path, 5, "expected 2 CSV fields", "found 3")
    instances = list(WmtNewstestReader(max_instances=2).read(path))
    assert [(i["source"], i["references"], i.source[1]) for i in instances] == [
        ("你好,世界", ['Hello, "world"'], 2), ("多\n行", ["x"], 3)]
    path = write(tmp_path, "c.csv", '0,1\n你好,"Hello\n')
    assert_error(WmtNewstestReader(), path, 2, "bad CSV")
    assert error.detail.startswith("expected")


# ---------------------------------------------------------------- MRC


def squad(tmp_path, qas, context="北京是中国的首都。", name="m.json"):
    document = {"version": "v1.0", "data": [{"title": "t", "paragraphs": [{"id": "P1", "context": context, "qas": qas}]}]}
    return write(tmp_path, name, json.dumps(document, ensure_ascii=False, indent=2))


def qa(qa_id, question, *answers):
    return {"question": question, "id": qa_id, "answers": [{"text": t, "answer_start": s} for t, s in answers]}


def question_lines(path):
    """1-based lines of the "question" keys, in order."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    return [n for n, l in enumerate(lines, start=1) if l.strip().startswith('"question":')]


def test_bad_json_names_its_line(tmp_path):
    path = write(tmp_path, "m.json", '{\n  "data": [\n    {"paragraphs": []}\n    {"paragraphs": []}\n  ]\n}')
    assert_error(Cmrc2018Reader(), path, 4, "bad JSON", "Expecting ',' delimiter")


def test_answer_outside_or_mismatching_context(tmp_path):
    path = squad(tmp_path, [qa("Q1", "首都？", ("北京", 0)), qa("Q2", "哪国？", ("中国", 40))])
    assert_error(Cmrc2018Reader(on_bad_answer="error"), path, question_lines(path)[1],
                 "question Q2", "answer '中国' at answer_start=40 outside its context")
    path = squad(tmp_path, [qa("Q1", "首都？", ("北京", 1))], name="n.json")
    assert_error(Cmrc2018Reader(on_bad_answer="error"), path, question_lines(path)[0],
                 "question Q1", "does not match its context", "context there: '京是'")


def test_bad_answer_fix_skip(tmp_path):
    context = "中国队赢了。中国队又赢了。"
    path = squad(tmp_path, [qa("Q1", "谁赢了？", ("中国队", 7), ("中国队", 0), ("美国队", -1))], context=context)
    fixed, messages = read_quietly(Cmrc2018Reader(), path)
    assert fixed[0]["answers"] == [{"text": "中国队", "answer_start": 6}, {"text": "中国队", "answer_start": 0}]
    assert fixed[0]["answer_texts"] == ["中国队", "中国队", "美国队"]
    assert messages == [f"{path}: on_bad_answer='fix': 1 answers moved to where their text occurs, 1 not found "
                        "at their answer_start dropped from 'answers' (still in 'answer_texts')"]
    skipped, _ = read_quietly(Cmrc2018Reader(on_bad_answer="skip"), path)
    assert skipped[0]["answers"] == [{"text": "中国队", "answer_start": 0}]


def test_empty_question(tmp_path):
    path = squad(tmp_path, [qa("Q1", "首都？", ("北京", 0)), qa("Q2", "  ", ("中国", 3))])
    assert_error(Cmrc2018Reader(), path, question_lines(path)[1], "empty question (id Q2)")
    assert [i["id"] for i in Cmrc2018Reader(on_empty_question="skip").read(path)] == ["Q1"]


def test_missing_key_and_duplicate_id(tmp_path):
    path = squad(tmp_path, [{"question": "首都？", "id": "Q1"}])
    assert_error(Cmrc2018Reader(), path, question_lines(path)[0], "expected key 'answers'")
    path = squad(tmp_path, [qa("Q1", "首都？", ("北京", 0)), qa("Q1", "哪国？", ("中国", 3))], name="d.json")
    assert_error(Cmrc2018Reader(), path, question_lines(path)[1], "question id Q1 appears twice")


def test_mrc_source_lines_and_chars(tmp_path):
    path = squad(tmp_path, [qa("Q1", "谁发布了iPhone？", ("苹果", 0))], context="苹果发布了iPhone 15。")
    [instance] = Cmrc2018Reader().read(path)
    assert instance.source == (path, question_lines(path)[0])
    assert instance["question_chars"] == ["谁", "发", "布", "了", "iPhone", "？"]
    assert instance["context_chars"] == ["苹", "果", "发", "布", "了", "iPhone", " ", "15", "。"]


# ---------------------------------------------------------------- NIST


@pytest.mark.parametrize(
    "reference, line, phrases",
    [("mismatch.ref.sgm", 4, ["doc 'XIN_0001' seg id 3 is not in the source", "source seg ids: 1, 2"]),
     ("missing.ref.sgm", 2, ["doc 'XIN_0001' lacks seg id 2 of the source", "tiny.src.sgm:5"])],
)
def test_nist_mismatched_segment_ids(reference, line, phrases):
    error = error_of(NistReader(references=["tiny.ref0.sgm", reference]), str(NIST / "tiny.src.sgm"))
    assert error.path == str(NIST / reference) and error.line == line, str(error)
    for phrase in phrases:
        assert phrase in str(error)


def test_nist_missing_doc_duplicate_seg_unclosed_seg(tmp_path):
    source = tmp_path / "t.src.sgm"
    shutil.copy(NIST / "tiny.src.sgm", source)
    write(tmp_path, "t.ref0.sgm", '<refset trglang="English">\n<doc docid="XIN_0001" sysid="r">\n'
          "<seg id=1>a</seg>\n<seg id=2>b</seg>\n</doc>\n</refset>\n")
    error = error_of(NistReader(), str(source))
    assert (error.path, error.line) == (str(tmp_path / "t.ref0.sgm"), 1) and "doc 'AFP_0002'" in str(error)
    bad = write(tmp_path, "dup.src.sgm", '<srcset>\n<doc docid="d">\n<seg id=1>甲</seg>\n<seg id=1>乙</seg>\n</doc>\n')
    assert_error(NistReader(references=[]), bad, 4, "seg id 1 twice (first at line 3)")
    bad = write(tmp_path, "open.src.sgm", '<srcset>\n<doc docid="d">\n<seg id=1>甲\n<seg id=2>乙</seg>\n</doc>\n')
    assert_error(NistReader(references=[]), bad, 3, "<seg id=1> of doc 'd' has no </seg>")


def test_nist_no_reference_found(tmp_path):
    source = write(tmp_path, "lonely.src.sgm", '<srcset>\n<doc docid="d">\n<seg id=1>甲</seg>\n</doc>\n')
    assert_error(NistReader(), source, None, "no reference file matches", "lonely.ref*.sgm")
