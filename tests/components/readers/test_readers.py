"""Every reader on the whole shipped files: counts against SOURCES.md, field invariants."""
from __future__ import annotations

import bisect
import csv
import inspect
import json
import sys
import types
import warnings
import zlib
from collections import Counter
from pathlib import Path

import pytest
from seqeval.metrics.sequence_labeling import get_entities
from seqeval.scheme import IOB2, IOBES, Entities

from multigrain.components.readers.base import FileReader
from multigrain.components.readers.classification import ChnSentiCorpReader, ThucNewsTitlesReader
from multigrain.components.readers.mrc import Cmrc2018Reader, DrcdReader
from multigrain.components.readers.ner import MsraNerReader, ResumeNerReader, WeiboNerReader
from multigrain.components.readers.nist import NistReader
from multigrain.components.readers.pair import BqCorpusReader
from multigrain.components.readers.raw_text import RawTextReader
from multigrain.components.readers.translation import TatoebaReader, WmtNewstestReader
from multigrain.components.text import split_chars, token_starts
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Reader

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
NIST = Path(__file__).resolve().parents[2] / "fixtures" / "readers" / "nist"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared/data not present")


def read_all(reader, path, expect_warnings=False):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        instances = list(reader.read(str(path)))
    if not expect_warnings:
        assert not caught, [str(w.message) for w in caught[:3]]
    return instances, [str(w.message) for w in caught]


def check_ner(instances, path):
    for instance in instances:
        assert len(instance["chars"]) == len(instance["tags"]) > 0
        assert instance.source[0] == str(path) and instance.source[1] >= 1


def broken_sentences(instances, scheme):
    """Oracle: sentences where seqeval's strict decoding differs from its lenient one."""
    broken = set()
    for instance in instances:
        tags = ["I-" + t[2:] if t.startswith("M-") else t for t in instance["tags"]]
        lenient = set(get_entities(tags))
        strict = {(e.tag, e.start, e.end - 1) for e in Entities([tags], scheme).entities[0]}
        if lenient != strict:
            broken.add(instance.source[1])
    return broken


def warned_sentences(instances, messages, path):
    starts = sorted(i.source[1] for i in instances)
    lines = [int(m.split(f"{path}:")[1].split(":")[0]) for m in messages]
    return {starts[bisect.bisect_right(starts, line) - 1] for line in lines}


# ---------------------------------------------------------------- NER


def read_ner_file(reader, path, sentences: int, chars: int, n_warned: int, scheme) -> list:
    """Read a whole shared NER file: its sentence and character counts, and one warning for
    exactly each sentence whose tags break the scheme (seqeval's strict reading)."""
    instances, messages = read_all(reader, path, expect_warnings=True)
    check_ner(instances, path)
    assert len(instances) == sentences
    assert sum(len(i["chars"]) for i in instances) == chars
    assert len(messages) == n_warned
    assert warned_sentences(instances, messages, path) == broken_sentences(instances, scheme)
    return instances


@pytest.mark.parametrize(
    "split, sentences, chars, n_warned",
    [("train", 3821, 124099, 4), ("dev", 463, 13890, 0), ("test", 477, 15100, 0)],
)
def test_resume_counts_tags_and_scheme_warnings(split, sentences, chars, n_warned):
    path = DATA / "resume_ner" / f"{split}.char.bmes"
    instances = read_ner_file(ResumeNerReader(), path, sentences, chars, n_warned, IOBES)
    types_ = {t[2:] for i in instances for t in i["tags"] if t != "O"}
    assert types_ == {"CONT", "EDU", "LOC", "NAME", "ORG", "PRO", "RACE", "TITLE"}
    head = path.read_text(encoding="utf-8").split("\n\n")[0].split("\n")
    assert [(c, t) for c, t in zip(instances[0]["chars"], instances[0]["tags"])] == [tuple(l.split(" ")) for l in head]


@pytest.mark.parametrize(
    "split, sentences, chars, n_warned",
    [("train", 1350, 73778, 8), ("dev", 270, 14509, 0), ("test", 270, 14842, 4)],
)
def test_weibo_counts_chars_and_scheme_warnings(split, sentences, chars, n_warned):
    path = DATA / "weibo_ner" / f"weiboNER_2nd_conll.{split}"
    instances = read_ner_file(WeiboNerReader(), path, sentences, chars, n_warned, IOB2)
    # independent oracle for the position digits: the file's first column minus its ASCII digits,
    # except a digit character carrying a 2-digit position ("310" -> "3")
    lines = [l.split("\t")[0] for l in path.read_text(encoding="utf-8").split("\n") if l.strip()]
    expected = []
    for token in lines:
        stripped = token.rstrip("0123456789")
        expected.append(stripped or token[0])
    assert [c for i in instances for c in i["chars"]] == expected


def test_weibo_entity_kinds_partition_the_mentions():
    path = DATA / "weibo_ner" / "weiboNER_2nd_conll.dev"
    both, _ = read_all(WeiboNerReader(), path)
    named, _ = read_all(WeiboNerReader(entity_kind="NAM"), path)
    nominal, _ = read_all(WeiboNerReader(entity_kind="NOM"), path)
    for a, n, m in zip(both, named, nominal):
        assert a["chars"] == n["chars"] == m["chars"]
        for tag, tn, tm in zip(a["tags"], n["tags"], m["tags"]):
            if tag.endswith(".NAM"):
                assert (tn, tm) == (tag[:-4], "O")
            elif tag.endswith(".NOM"):
                assert (tn, tm) == ("O", tag[:-4])
            else:
                assert tag == tn == tm == "O"
    counts = Counter(t for i in both for t in i["tags"])
    assert counts["B-PER.NAM"] == 90 and counts["B-PER.NOM"] == 208  # counted with grep -c
    assert sum(t == "B-PER" for i in named for t in i["tags"]) == 90


@pytest.fixture(scope="module")
def msra_train():
    instances, _ = read_all(MsraNerReader(), DATA / "msra_ner" / "train1.txt")
    return instances


def test_msra_train_counts(msra_train):
    path = DATA / "msra_ner" / "train1.txt"
    check_ner(msra_train, path)
    assert len(msra_train) == 46364
    assert sum(len(i["chars"]) for i in msra_train) == 2169879
    assert [i.source[1] for i in msra_train[:3]] == [1, 2, 3]
    # chunk oracle: the first line of the file, re-derived by hand
    assert "".join(msra_train[0]["chars"]).startswith("当希望工程救助的百万儿童成长起来")
    assert set(msra_train[0]["tags"]) == {"O"}
    entity_chunks = sum(train_line.count("/n") for train_line in path.read_text(encoding="utf-8").split("\n"))
    assert sum(t[0] in "BS" for i in msra_train for t in i["tags"]) == entity_chunks


def test_msra_dev_split_is_a_deterministic_partition(msra_train):
    path = str(DATA / "msra_ner" / "train1.txt")
    train = list(MsraNerReader(split="train").read(path))
    dev = list(MsraNerReader(split="dev").read(path))
    assert (len(train), len(dev)) == (41641, 4723)
    expected_dev = [i.source for i in msra_train if zlib.crc32("".join(i["chars"]).encode("utf-8")) % 1000 < 100]
    assert [i.source for i in dev] == expected_dev
    assert sorted(i.source[1] for i in train + dev) == list(range(1, 46365))


def test_msra_two_test_files_agree():
    sighan, _ = read_all(MsraNerReader(), DATA / "msra_ner" / "testright1.txt")
    chars, _ = read_all(MsraNerReader(), DATA / "msra_ner" / "test.char.bmes")
    for instances in (sighan, chars):
        assert len(instances) == 4365
        assert sum(len(i["chars"]) for i in instances) == 172601
    for a, b in zip(sighan, chars):
        assert a["chars"] == b["chars"]
        assert a["tags"] == b["tags"]  # the SIGHAN -> BMES conversion reproduces the shipped one
    text = (DATA / "msra_ner" / "test.char.bmes").read_text(encoding="utf-8")
    assert not text.endswith("\n\n")  # the last sentence has no blank line after it, and is read
    assert chars[-1].source[1] == text.count("\n") - len(chars[-1]["chars"]) + 1


# ---------------------------------------------------------------- sentence-level


def check_sentences(instances, text_field="text", chars_field="chars"):
    for instance in instances:
        assert "".join(instance[chars_field]) == instance[text_field]
        assert instance[chars_field] == split_chars(instance[text_field], True)


@pytest.mark.parametrize(
    "split, total, negatives, positives",
    [("train", 9600, 4801, 4799), ("dev", 1200, 607, 593), ("test", 1200, 592, 608)],
)
def test_chnsenticorp(split, total, negatives, positives):
    path = DATA / "chnsenticorp" / f"{split}.tsv"
    instances, _ = read_all(ChnSentiCorpReader(), path)
    assert len(instances) == total
    assert Counter(i["label"] for i in instances) == {"0": negatives, "1": positives}
    check_sentences(instances)
    assert instances[0].source == (str(path), 2)
    if split == "train":  # a full-width space at the end of line 200 is kept
        by_line = {i.source[1]: i for i in instances}
        assert by_line[200]["text"].endswith("\u3000") and by_line[200]["chars"][-1] == "\u3000"
        assert "soho" in by_line[200]["chars"]


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_bq_corpus(split):
    path = DATA / "bq_corpus" / f"{split}.txt"
    instances, _ = read_all(BqCorpusReader(), path)
    n = 100000 if split == "train" else 10000
    assert len(instances) == n
    assert Counter(i["label"] for i in instances) == {"0": n // 2, "1": n // 2}
    check_sentences(instances, "text_a", "chars_a")
    check_sentences(instances, "text_b", "chars_b")
    first = path.read_text(encoding="utf-8").split("\n")[0].split("_!_")
    assert [instances[0]["text_a"], instances[0]["text_b"], instances[0]["label"]] == first


def test_thucnews_titles_and_split():
    names = (DATA / "thucnews_titles" / "class.txt").read_text(encoding="utf-8").split("\n")
    for split in ("dev", "test"):
        instances, _ = read_all(ThucNewsTitlesReader(), DATA / "thucnews_titles" / f"{split}.txt")
        assert len(instances) == 10000
        assert Counter(i["label"] for i in instances) == {name: 1000 for name in names}
        check_sentences(instances)
    path = str(DATA / "thucnews_titles" / "dev.txt")
    every = list(ThucNewsTitlesReader().read(path))
    train = list(ThucNewsTitlesReader(split="train").read(path))
    dev = list(ThucNewsTitlesReader(split="dev").read(path))
    assert (len(train), len(dev)) == (8993, 1007)
    assert [i.source for i in dev] == [i.source for i in every if zlib.crc32(i["text"].encode()) % 1000 < 100]
    assert {i.source for i in train}.isdisjoint(i.source for i in dev)
    first = every[0]
    assert first["text"] == "体验2D巅峰 倚天屠龙记十大创新概览" and first["label"] == "game"
    assert first["chars"][:3] == ["体", "验", "2D"]


def test_thucnews_without_class_file_keeps_ids(tmp_path):
    path = tmp_path / "dev.txt"
    path.write_text("标题一\t3\n标题二\t0\n", encoding="utf-8")
    assert [i["label"] for i in ThucNewsTitlesReader().read(str(path))] == ["3", "0"]


# ---------------------------------------------------------------- MRC


def check_mrc(instances, path, question_lines=True):
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    for instance in instances:
        context = instance["context"]
        assert "".join(instance["context_chars"]) == context
        assert "".join(instance["question_chars"]) == instance["question"]
        for answer in instance["answers"]:
            start = answer["answer_start"]
            assert context[start:start + len(answer["text"])] == answer["text"]
        if question_lines:
            line = lines[instance.source[1] - 1].strip()
            assert line.startswith('"question": ' + json.dumps(instance["question"], ensure_ascii=False))


def oracle_answers(path):
    """(answers, bad answers, bad answers whose text is absent) by a plain json walk."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))["data"]
    total = bad = absent = 0
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                for a in qa["answers"]:
                    total += 1
                    s, t = a["answer_start"], a["text"]
                    if s < 0 or paragraph["context"][s:s + len(t)] != t:
                        bad += 1
                        absent += t not in paragraph["context"]
    return total, bad, absent


@pytest.mark.parametrize("split, questions, moved, dropped", [("train", 10142, 21, 0), ("dev", 3219, 7, 193)])
def test_cmrc2018_reads_with_default_fix(split, questions, moved, dropped):
    path = DATA / "cmrc2018" / f"cmrc2018_{split}.json"
    instances, messages = read_all(Cmrc2018Reader(), path, expect_warnings=True)
    assert len(instances) == questions
    assert len({i["id"] for i in instances}) == questions
    check_mrc(instances, path)
    total, bad, absent = oracle_answers(path)
    assert (bad, absent) == (moved + dropped, dropped)
    assert sum(len(i["answer_texts"]) for i in instances) == total
    assert sum(len(i["answers"]) for i in instances) == total - dropped
    assert all(i["answers"] for i in instances)
    assert len(messages) == 1 and f"{moved} answers moved" in messages[0] and f"{dropped} not found" in messages[0]


def test_cmrc2018_train_off_by_one_answer_is_moved_to_its_text():
    path = DATA / "cmrc2018" / "cmrc2018_train.json"
    instances, _ = read_all(Cmrc2018Reader(), path, expect_warnings=True)
    qa = next(i for i in instances if i["id"] == "TRAIN_876_QUERY_0")
    assert qa["answers"] == [{"text": "跳海", "answer_start": 341}]  # the file says 342
    with pytest.raises(DataError) as error:
        list(Cmrc2018Reader(on_bad_answer="error").read(str(path)))
    assert error.value.line == 5999 and "TRAIN_876_QUERY_0" in str(error.value)
    skipped, _ = read_all(Cmrc2018Reader(on_bad_answer="skip"), path, expect_warnings=True)
    assert sum(not i["answers"] for i in skipped) == 21


def test_cmrc2018_trial_has_two_empty_questions():
    path = DATA / "cmrc2018" / "cmrc2018_trial.json"
    with pytest.raises(DataError) as error:
        list(Cmrc2018Reader().read(str(path)))
    assert error.value.line == 9737 and "empty question" in str(error.value) and "TRIAL_776_QUERY_4" in str(error.value)
    kept, _ = read_all(Cmrc2018Reader(on_empty_question="keep"), path, expect_warnings=True)
    skipped, _ = read_all(Cmrc2018Reader(on_empty_question="skip"), path, expect_warnings=True)
    assert (len(kept), len(skipped)) == (1002, 1000)
    check_mrc(kept, path)


@pytest.mark.parametrize("split, questions", [("dev", 3524), ("test", 3493)])
def test_drcd(split, questions):
    path = DATA / "drcd" / f"DRCD_{split}.json"
    instances, _ = read_all(DrcdReader(), path)  # no answer needs fixing: no warning
    assert len(instances) == questions
    check_mrc(instances, path, question_lines=False)
    assert {i.source[1] for i in instances} == {1}
    assert sum(len(i["answers"]) for i in instances) == oracle_answers(path)[0]


# ---------------------------------------------------------------- translation


def test_tatoeba_splits_partition_the_pairs():
    path = DATA / "tatoeba_cmn_eng" / "cmn.txt"
    every, _ = read_all(TatoebaReader(), path)
    assert len(every) == 29155
    assert every[0]["source"] == "嗨。" and every[0]["references"] == ["Hi."] and every[0].source[1] == 1
    check_sentences(every, "source")
    parts = {s: list(TatoebaReader(split=s).read(str(path))) for s in ("train", "dev", "test")}
    assert {s: len(v) for s, v in parts.items()} == {"train": 26309, "dev": 1473, "test": 1373}
    sources = [i.source for part in parts.values() for i in part]
    assert sorted(sources) == [i.source for i in every]
    bucket = {i.source: zlib.crc32(f"{i['references'][0]}\t{i['source']}".encode()) % 1000 for i in every}
    assert all(bucket[i.source] < 50 for i in parts["test"])
    assert all(50 <= bucket[i.source] < 100 for i in parts["dev"])


@pytest.mark.parametrize("year, pairs", [(18, 3960), (19, 2001), (20, 1418)])
def test_wmt_newstest(year, pairs):
    path = DATA / "wmt_newstest_zh_en" / f"damo_mt_testsets_zh2en_news_wmt{year}.csv"
    instances, _ = read_all(WmtNewstestReader(), path)
    assert len(instances) == pairs
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))[1:]
    assert [(i["source"], i["references"]) for i in instances] == [(r[0], [r[1]]) for r in rows]
    check_sentences(instances, "source")
    assert [i.source[1] for i in instances] == list(range(2, pairs + 2))  # no record spans lines


def test_nist_fixture_with_four_references():
    path = NIST / "tiny.src.sgm"
    instances, _ = read_all(NistReader(), path)
    assert [(i["doc_id"], i["seg_id"], i.source[1]) for i in instances] == [
        ("XIN_0001", "1", 4), ("XIN_0001", "2", 5), ("AFP_0002", "1", 9)]
    assert instances[0]["references"] == [
        "China's economy grew by 7% .", "Chinese economic growth was 7 percent .",
        "The Chinese economy grew 7% .", "China & its economy grew 7% ."]
    assert instances[1]["chars"] == ["他", "去", "了", "Beijing", "大", "学", "。"]
    assert instances[2]["source"] == "今天天气很好。"  # a segment over three lines
    assert all(len(i["references"]) == 4 for i in instances)
    explicit = list(NistReader(references=["tiny.ref3.sgm", str(NIST / "tiny.ref0.sgm")]).read(str(path)))
    assert explicit[0]["references"] == ["China & its economy grew 7% .", "China's economy grew by 7% ."]
    alone = list(NistReader(references=[]).read(str(path)))
    assert [i["references"] for i in alone] == [[], [], []]


# ---------------------------------------------------------------- platform contract


def test_raw_text_skips_blank_lines(tmp_path):
    path = tmp_path / "raw.txt"
    path.write_text("今天 good天气\n\n   \nＡ１😀好\n", encoding="utf-8")
    instances = list(RawTextReader().read(str(path)))
    assert [(i["text"], i.source[1]) for i in instances] == [("今天 good天气", 1), ("Ａ１😀好", 4)]
    assert instances[0]["chars"] == ["今", "天", " ", "good", "天", "气"]
    assert instances[1]["chars"] == ["Ａ", "１", "😀", "好"]
    assert list(RawTextReader(keep_latin_words=False).read(str(path)))[0]["chars"][3:7] == ["g", "o", "o", "d"]


def test_split_chars_and_token_starts():
    text = "iPhone12发布了，售价5999元 😀 e.g."
    tokens = split_chars(text)
    assert "".join(tokens) == text
    assert tokens == ["iPhone12", "发", "布", "了", "，", "售", "价", "5999", "元", " ", "😀", " ", "e", ".", "g", "."]
    assert split_chars(text, keep_latin_words=False) == list(text)
    starts = token_starts(tokens)
    assert all(text[s:s + len(t)] == t for s, t in zip(starts, tokens))


NAMES = {
    "resume_ner": ResumeNerReader, "weibo_ner": WeiboNerReader, "msra_ner": MsraNerReader,
    "chnsenticorp": ChnSentiCorpReader, "thucnews_titles": ThucNewsTitlesReader, "bq_corpus": BqCorpusReader,
    "cmrc2018": Cmrc2018Reader, "drcd": DrcdReader, "tatoeba_cmn_eng": TatoebaReader,
    "wmt_newstest": WmtNewstestReader, "nist": NistReader, "raw_text": RawTextReader,
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_registered_with_typed_constructor(name):
    cls = Reader.by_name(name)
    assert cls is NAMES[name] and issubclass(cls, FileReader)
    parameters = {}
    for klass in reversed(cls.__mro__):
        if "__init__" in vars(klass) and issubclass(klass, FileReader):
            parameters.update(inspect.signature(klass.__init__).parameters)
    parameters = {k: p for k, p in parameters.items() if k != "self" and p.kind is p.POSITIONAL_OR_KEYWORD}
    assert {"lattice_builder", "cache_dir", "max_instances"} <= set(parameters)
    assert all(p.annotation is not inspect.Parameter.empty for p in parameters.values())


def test_lattice_builder_passes_the_stream_through_with_lattices(tmp_path, monkeypatch):
    calls = {}

    def with_lattices(instances, data_path, builder, fields, cache_dir):
        calls.update(data_path=data_path, builder=builder, fields=fields, cache_dir=cache_dir)
        for instance in instances:
            for chars_field, lattice_field in fields.items():
                instance[lattice_field] = ("lattice of", tuple(instance[chars_field]))
            yield instance

    fake = types.ModuleType("multigrain.components.lattice.cache")
    fake.with_lattices = with_lattices
    monkeypatch.setitem(sys.modules, "multigrain.components.lattice.cache", fake)
    path = tmp_path / "pairs.txt"
    path.write_text("你好_!_您好_!_1\n再见_!_拜拜_!_1\n", encoding="utf-8")
    builder = object()
    reader = BqCorpusReader(lattice_builder=builder, cache_dir=str(tmp_path / "cache"), max_instances=1)
    instances = list(reader.read(path))
    assert calls == {"data_path": str(path), "builder": builder,
                     "fields": {"chars_a": "lattice_a", "chars_b": "lattice_b"}, "cache_dir": str(tmp_path / "cache")}
    assert len(instances) == 1 and instances[0]["lattice_b"] == ("lattice of", ("您", "好"))
    assert ResumeNerReader.lattice_fields == {"chars": "lattice"}
    assert Cmrc2018Reader.lattice_fields == {"context_chars": "lattice"}


def test_reading_is_lazy_and_max_instances_stops_early(tmp_path):
    path = tmp_path / "x.bmes"
    path.write_text("中 O\n\n国 O\n\n坏 行 行\n", encoding="utf-8")
    stream = ResumeNerReader().read(str(path))  # nothing is read yet: no error
    assert [i["chars"] for i in ResumeNerReader(max_instances=2).read(str(path))] == [["中"], ["国"]]
    with pytest.raises(DataError):
        list(stream)
