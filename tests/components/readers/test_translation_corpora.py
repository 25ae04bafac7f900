"""The TVsub and line-aligned multi-reference readers (``tvsub``, ``parallel_refs``), the
multi-system NIST refset and the Moses detokenizer: counts on the shipped files, and one clear
error for each kind of bad input (hand-written files)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multigrain.components.readers.detokenize import moses_detokenize
from multigrain.components.readers.nist import NistReader, parse_sgm, parse_sgm_systems
from multigrain.components.readers.parallel import ParallelRefsReader
from multigrain.components.readers.tvsub import TvsubReader
from multigrain.platform.errors import ConfigurationError, DataError, MultigrainError
from tests.conftest import DATA

TVSUB = DATA / "tvsub_zh_en"
WMT22 = DATA / "wmt22_generaltest_zh_en"
TEST_SGM = TVSUB / "processed" / "test" / "test_trg.sgm"

needs_data = pytest.mark.skipif(not TVSUB.is_dir() or not WMT22.is_dir(), reason="shared/data not present")


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


def error_of(reader, path: str) -> DataError:
    with pytest.raises(DataError) as caught:
        list(reader.read(path))
    return caught.value


def no_space(text: str) -> str:
    return re.sub(r"\s+", "", text)


# ------------------------------------------------------------------------------------- shipped files
@needs_data
def test_tvsub_test_has_1154_sentences_with_the_3_sgml_references():
    instances = list(TvsubReader(references=[str(TEST_SGM)]).read(str(TVSUB / "test" / "test.orignal.zh")))
    sources = (TVSUB / "test" / "test.orignal.zh").read_text(encoding="utf-8").splitlines()
    raw_english = (TVSUB / "test" / "test.orignal.en").read_text(encoding="utf-8").splitlines()
    systems = parse_sgm_systems(str(TEST_SGM))
    assert [s.system for s in systems] == ["reference_1", "reference_2", "reference_3"]
    assert len(instances) == 1154 and all(len(x["references"]) == 3 for x in instances)
    assert [x["source"] for x in instances] == sources
    for k, system in enumerate(systems):  # reference k of line i = segment i of system k in file order
        assert [no_space(x["references"][k]) for x in instances] == \
               [no_space(moses_detokenize(s.text)) for s in system.segments.values()]
    # the SGML's first reference is the lower-cased raw test reference, line by line (alignment check)
    assert [no_space(x["references"][0]) for x in instances] == \
           [no_space(moses_detokenize(line)).lower() for line in raw_english]
    assert instances[1]["references"] == ["no problems. it's all taken care of.", "no problems. it's all done.",
                                          "no problems. it's all done."]
    assert instances[-1].source == (str(TVSUB / "test" / "test.orignal.zh"), 1154)


@needs_data
def test_tvsub_dev_pairs_and_detokenized_references():
    path = str(TVSUB / "dev" / "dev.orignal.zh")
    instances = list(TvsubReader().read(path))
    assert len(instances) == 1086 and all(len(x["references"]) == 1 for x in instances)
    assert instances[2]["references"] == ["hello, Mrs. Ross. woo-hoo!"]
    assert not any("&apos;" in x["references"][0] or x["references"][0].endswith(" .") for x in instances)
    tokenized = list(TvsubReader(detokenize_references=False).read(path))
    assert tokenized[2]["references"] == ["hello , Mrs. Ross . woo-hoo !"]


@needs_data
def test_tvsub_training_pairs_in_episode_and_line_order():
    listing = TVSUB / "EPISODES.txt"
    episodes = listing.read_text(encoding="utf-8").split()
    assert len(episodes) == 592 and episodes[:3] == ["0", "5", "10"]
    first_three = [(TVSUB / "train" / f"{e}.zh").read_text(encoding="utf-8").splitlines() for e in episodes[:3]]
    english = [(TVSUB / "train" / f"{e}.en").read_text(encoding="utf-8").splitlines() for e in episodes[:3]]
    n = sum(map(len, first_three))
    instances = list(TvsubReader(max_instances=n).read(str(listing)))
    assert [x["source"] for x in instances] == [line for lines in first_three for line in lines]
    assert [x["references"] for x in instances] == [[line] for lines in english for line in lines]  # raw, as it is
    assert [x["episode"] for x in instances] == [e for e, lines in zip(episodes, first_three) for _ in lines]
    assert instances[len(first_three[0])].source == (str(TVSUB / "train" / "5.zh"), 1)
    again = list(TvsubReader(max_instances=n - 7).read(str(listing)))
    assert [x.source for x in again] == [x.source for x in instances[:n - 7]]


@needs_data
def test_wmt22_has_1875_segments_with_references_a_and_b():
    refs = [str(WMT22 / f"generaltest2022.zh-en.ref.{r}.en") for r in "AB"]
    instances = list(ParallelRefsReader(references=refs).read(str(WMT22 / "generaltest2022.zh-en.src.zh")))
    a, b = (Path(r).read_text(encoding="utf-8").splitlines() for r in refs)
    assert len(instances) == 1875
    assert [x["references"] for x in instances] == [[x, y] for x, y in zip(a, b)]
    assert sum(x != y for x, y in zip(a, b)) > 1000  # two independent references


# ------------------------------------------------------------------------------------- bad input
def test_tvsub_episode_files_with_different_line_counts(tmp_path):
    listing = write(tmp_path, "EPISODES.txt", "1\n2\n")
    write(tmp_path, "train/1.zh", "你好\n再见\n")
    write(tmp_path, "train/1.en", "Hello\nBye\n")
    write(tmp_path, "train/2.zh", "一\n二\n三\n")
    write(tmp_path, "train/2.en", "One\nTwo\n")
    assert len(list(TvsubReader(max_instances=2).read(listing))) == 2
    error = error_of(TvsubReader(), listing)
    assert error.path == str(tmp_path / "train" / "2.zh") and error.line is None
    assert "3 lines" in error.detail and str(tmp_path / "train" / "2.en") in error.detail and "has 2" in error.detail


def test_tvsub_missing_episode_and_empty_lines(tmp_path):
    listing = write(tmp_path, "EPISODES.txt", "1\n\n7\n")
    write(tmp_path, "train/1.zh", "你好\n")
    write(tmp_path, "train/1.en", "Hello\n")
    error = error_of(TvsubReader(), listing)
    assert (error.path, error.line) == (listing, 3) and "episode '7'" in error.detail
    write(tmp_path, "train/7.zh", "你好\n\n")
    write(tmp_path, "train/7.en", "Hello\nBye\n")
    error = error_of(TvsubReader(), listing)
    assert (error.path, error.line, error.detail) == (str(tmp_path / "train" / "7.zh"), 2, "empty source sentence")
    write(tmp_path, "train/7.zh", "你好\n再见\n")
    write(tmp_path, "train/7.en", " \nBye\n")
    error = error_of(TvsubReader(), listing)
    assert (error.path, error.line, error.detail) == (str(tmp_path / "train" / "7.en"), 1, "empty reference")


def test_parallel_refs_reference_with_another_line_count(tmp_path):
    source = write(tmp_path, "src.zh", "一\n二\n三\n")
    a = write(tmp_path, "ref.A.en", "one\ntwo\nthree\n")
    b = write(tmp_path, "ref.B.en", "one\ntwo\n")
    assert [x["references"] for x in ParallelRefsReader(references=[a]).read(source)] == [["one"], ["two"], ["three"]]
    error = error_of(ParallelRefsReader(references=[a, b]), source)
    assert (error.path, error.line) == (b, None)
    assert "2 reference segments" in error.detail and "has 3 lines" in error.detail and source in error.detail


def test_parallel_refs_empty_source_or_reference_line(tmp_path):
    source = write(tmp_path, "src.zh", "一\n\n三\n")
    a = write(tmp_path, "ref.A.en", "one\ntwo\nthree\n")
    error = error_of(ParallelRefsReader(references=[a]), source)
    assert (error.path, error.line, error.detail) == (source, 2, "empty source sentence")
    source = write(tmp_path, "src.zh", "一\n二\n三\n")
    b = write(tmp_path, "ref.B.en", "one\ntwo\n  \n")
    error = error_of(ParallelRefsReader(references=[a, b]), source)
    assert (error.path, error.line, error.detail) == (b, 3, "empty reference")


def test_parallel_refs_missing_reference_and_empty_list(tmp_path):
    source = write(tmp_path, "src.zh", "一\n")
    error = error_of(ParallelRefsReader(references=["nowhere.*.en"]), source)
    assert error.path == source and "no reference file matches 'nowhere.*.en'" in error.detail
    write(tmp_path, "ref.A.en", "one\n")
    relative = list(ParallelRefsReader(references=["ref.*.en"]).read(source))  # found beside the source
    assert relative[0]["references"] == ["one"]
    with pytest.raises(ConfigurationError, match="at least one reference"):
        ParallelRefsReader(references=[])


REFSET = ('<refset setid="s" srclang="Chinese" trglang="English">\n'
          '<DOC docid="A" sysid="r1">\n<seg id=1> it &apos;s me .</seg>\n</DOC>\n'
          '<DOC docid="B" sysid="r1">\n<seg id=1> bye !</seg>\n</DOC>\n'
          '<DOC docid="A" sysid="r2">\n<seg id=1> that &apos;s me .</seg>\n</DOC>\n'
          '<DOC docid="B" sysid="r2">\n<seg id=1> see you !</seg>\n</DOC>\n</refset>\n')


def test_sgml_refset_with_several_systems(tmp_path):
    sgm = write(tmp_path, "refs.sgm", REFSET)
    source = write(tmp_path, "src.zh", "是我\n再见\n")
    reader = ParallelRefsReader(references=[sgm], detokenize_references=True)
    assert [x["references"] for x in reader.read(source)] == [["it's me.", "that's me."], ["bye!", "see you!"]]
    with pytest.raises(DataError, match="holds 2 systems"):
        parse_sgm(sgm)
    # the NIST reader takes such a file as one reference per system
    src = write(tmp_path, "t.src.sgm", '<srcset>\n<doc docid="A">\n<seg id=1>是我</seg>\n</doc>\n'
                                       '<doc docid="B">\n<seg id=1>再见</seg>\n</doc>\n</srcset>\n')
    assert [x["references"] for x in NistReader(references=[sgm]).read(src)] == \
           [["it 's me .", "that 's me ."], ["bye !", "see you !"]]
    short = write(tmp_path, "src3.zh", "是我\n再见\n还有\n")
    error = error_of(TvsubReader(references=[sgm]), short)
    assert error.path == sgm and "of sysid 'r1'" in error.detail and "has 3 lines" in error.detail
    twice = write(tmp_path, "twice.sgm", REFSET.replace('docid="B" sysid="r2"', 'docid="A" sysid="r2"'))
    error = error_of(TvsubReader(references=[twice]), source)
    assert (error.path, error.line) == (twice, 11) and "doc 'A' of sysid 'r2' appears twice (first at line 8)" in error.detail


def test_tvsub_default_reference_is_the_en_file_beside(tmp_path):
    source = write(tmp_path, "dev.orignal.zh", "好 就是它了\n")
    error = error_of(TvsubReader(), source)
    assert "no reference file matches" in error.detail and "dev.orignal.en" in error.detail
    write(tmp_path, "dev.orignal.en", "okay , this is it . \n")
    assert [x["references"] for x in TvsubReader().read(source)] == [["okay, this is it."]]


# ------------------------------------------------------------------------------------- detokenizer
@pytest.mark.parametrize("tokenized, plain", [
    ("did everything go okay with the annulment ? ", "did everything go okay with the annulment?"),
    ("you didn &apos;t get the annulment ? ! ", "you didn't get the annulment?!"),
    ("I &apos;ll be across the hall . and I promise you ... ", "I'll be across the hall. and I promise you..."),
    ("it can say , &quot; Ross Geller : good at Marriage . &quot; ", 'it can say, "Ross Geller: good at Marriage."'),
    ("the boys &apos; room ( upstairs ) costs $ 5 %", "the boys' room (upstairs) costs $5%"),
    ("a well @-@ known 2 @,@ 000 &amp; more", "a well-known 2,000 & more"),
    ("he said &apos; no &apos; . &apos; twas the boss &apos; car", "he said 'no'. 'twas the boss' car"),
])
def test_moses_detokenize(tokenized, plain):
    assert moses_detokenize(tokenized) == plain


# ------------------------------------------------------------------------------------- any bytes
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(source=st.binary(max_size=60), reference=st.binary(max_size=60))
def test_any_bytes_give_our_errors_only(tmp_path, source, reference):
    (tmp_path / "s.zh").write_bytes(source)
    (tmp_path / "s.en").write_bytes(reference)
    (tmp_path / "r.sgm").write_bytes(b'<refset><doc docid="d" sysid="x"><seg id=1>' + reference)
    for reader in (TvsubReader(), ParallelRefsReader(references=[str(tmp_path / "r.sgm")])):
        try:
            list(reader.read(str(tmp_path / "s.zh")))
        except MultigrainError:
            pass
