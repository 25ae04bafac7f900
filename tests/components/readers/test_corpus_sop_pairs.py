"""Sentence order prediction pairs of the pre-training corpus (``text_corpus``): a pair is made
within one text (two consecutive pieces, or the two halves of a piece cut near its middle at a
sentence end), never of two texts of a source; a source whose texts are all too short to halve
yields no pair, says so in one line, and trains MSP only."""
import pytest

from multigrain.components.readers import corpus
from multigrain.components.readers.corpus import CorpusSource, TextCorpusReader, halving_cut
from multigrain.components.readers.ner import ResumeNerReader
from multigrain.platform.errors import ConfigurationError


def texts(instances):
    return [("".join(x["chars"]), "".join(x["chars_b"]) if "chars_b" in x else None) for x in instances]


@pytest.fixture(autouse=True)
def fresh_notes(monkeypatch):
    monkeypatch.setattr(corpus, "_NOTED", set())


def test_halving_cuts_at_the_sentence_end_nearest_the_middle():
    cut = lambda text, m=4: halving_cut(list(text), m)  # noqa: E731
    assert cut("一二三。四五六七八九十。甲乙丙丁。") == 12  # the 。 after 十 is nearest the middle (8.5)
    assert cut("一二三四五六七八，九十甲乙丙丁") == 9  # no sentence end: the clause mark
    assert cut("一二三四五六七八九十甲乙") == 6  # neither: the middle
    assert cut("一。二三四五六七八九十甲") == 6  # a sentence end too near an edge (a quarter) is no cut
    assert cut("一二三四五六七") is None  # under 2 x 4 characters: too short to halve
    assert cut("一二三四五六七八") == 4
    assert cut(["iPhone12", "很", "好", "。", "我", "们", "喜", "欢"], 2) == 4  # tokens, not code points


def test_pairs_are_made_within_one_text(tmp_path):
    long = "今天天气很好。" * 6 + "我们去公园散步吧！" * 4  # 78 characters: two pieces of at most 62
    (tmp_path / "reviews.txt").write_text("\n".join([long, "这家酒店的服务非常周到。房间也很干净！", "太短了。"]) + "\n",
                                          encoding="utf-8")
    reader = TextCorpusReader([CorpusSource("reviews.txt")], max_chars_per_text=62, min_sop_chars=4)
    got = texts(reader.read(str(tmp_path)))
    first, second = got[0]
    assert first + second == long and first.endswith("！") and len(first) <= 62  # consecutive pieces
    assert got[1] == ("这家酒店的服务非常周到。", "房间也很干净！")  # one text halved at its sentence end
    assert got[2] == ("太短了。", None)  # too short to halve: no pair, MSP only
    assert len(got) == 3  # no pair joins two reviews
    assert reader.sop_stats["reviews.txt"] == {"texts": 3, "consecutive": 1, "halved": 1, "single": 1}


def test_an_odd_last_piece_is_halved(tmp_path):
    text = "一二三四五六七八九十。" * 3  # pieces of at most 11: three, the third halved
    (tmp_path / "a.txt").write_text(text + "\n", encoding="utf-8")
    got = texts(TextCorpusReader([CorpusSource("a.txt")], max_chars_per_text=11, min_sop_chars=4).read(str(tmp_path)))
    assert got == [("一二三四五六七八九十。", "一二三四五六七八九十。"), ("一二三四五", "六七八九十。")]


def test_a_source_of_short_texts_has_no_pairs_and_says_so(tmp_path, capsys):
    (tmp_path / "ner.bmes").write_text("北 B-LOC\n京 E-LOC\n好 O\n\n上 B-LOC\n海 E-LOC\n\n", encoding="utf-8")
    reader = TextCorpusReader([CorpusSource("ner.bmes", ResumeNerReader())])
    assert texts(reader.read(str(tmp_path))) == [("北京好", None), ("上海", None)]
    err = capsys.readouterr().err
    assert ("text_corpus: ner.bmes: no sentence order pairs (every text is one piece under 16 characters, too short "
            "to halve): its 2 pieces train MSP only") in err
    list(TextCorpusReader([CorpusSource("ner.bmes", ResumeNerReader())], split="dev").read(str(tmp_path)))
    assert "ner.bmes" not in capsys.readouterr().err  # said once per process


def test_a_source_with_pairs_reports_them(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("这家酒店的服务非常周到。房间也很干净！\n", encoding="utf-8")
    list(TextCorpusReader([CorpusSource("a.txt")]).read(str(tmp_path)))
    assert ("text_corpus: a.txt: 1 texts -> 1 sentence order pairs (0 of two consecutive pieces, 1 halved pieces), "
            "0 pieces without a pair (MSP only)") in capsys.readouterr().err


def test_min_sop_chars_must_be_positive():
    with pytest.raises(ConfigurationError, match="min_sop_chars"):
        TextCorpusReader([CorpusSource("a.txt")], min_sop_chars=0)
