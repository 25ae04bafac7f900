"""The pre-training corpus reader (``text_corpus``) and raw-text shards: order, pairs within a
file, pieces cut at sentence ends, duplicates read once, deterministic shards that partition the
corpus, the character budget, lattices, and bad sources."""
import pytest

from multigrain.components.lattice.lexicon import LexiconBuilder
from multigrain.components.readers.corpus import CorpusSource, TextCorpusReader, pieces
from multigrain.components.readers.ner import ResumeNerReader
from multigrain.components.readers.raw_text import RawTextReader
from multigrain.platform.errors import ConfigurationError, DataError


@pytest.fixture
def corpus_dir(tmp_path):
    (tmp_path / "sub").mkdir()
    for episode, lines in ((2, ["第二集一。", "第二集二。", "第二集三。"]), (10, ["第十集一。", "第十集二。"])):
        (tmp_path / "sub" / f"{episode}.zh").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "ner.bmes").write_text("北 B-LOC\n京 E-LOC\n好 O\n\n北 B-LOC\n京 E-LOC\n好 O\n\n上 B-LOC\n海 E-LOC\n\n",
                                       encoding="utf-8")
    return tmp_path


def texts(instances):
    return [("".join(x["chars"]), "".join(x.get("chars_b", ""))) for x in instances]


def test_sources_in_order_pairs_within_a_document_file(corpus_dir):
    reader = TextCorpusReader([CorpusSource("sub/*.zh", document=True), CorpusSource("ner.bmes", ResumeNerReader())])
    got = texts(reader.read(str(corpus_dir)))
    # episode 2 before 10 (numbers sorted as numbers); consecutive lines of an episode pair up, its
    # odd third line stands alone; NER sentences are no document: unrelated, never paired (and too
    # short to halve); the duplicate NER sentence is read once
    assert got == [("第二集一。", "第二集二。"), ("第二集三。", ""), ("第十集一。", "第十集二。"), ("北京好", ""),
                   ("上海", "")]
    assert reader.sop_stats["sub/*.zh"] == {"texts": 5, "consecutive": 2, "single": 1}
    singles = TextCorpusReader([CorpusSource("sub/*.zh")], pairs=False).read(str(corpus_dir))
    assert [a for a, _ in texts(singles)] == ["第二集一。", "第二集二。", "第二集三。", "第十集一。", "第十集二。"]


def test_long_texts_are_cut_at_sentence_ends():
    chars = list("一二三。四五六七八九！十一")
    assert ["".join(p) for p in pieces(chars, 6)] == ["一二三。", "四五六七八九", "！十一"]
    assert ["".join(p) for p in pieces(chars, 20)] == ["".join(chars)]


def test_shards_partition_the_corpus_and_the_budget_stops_it(corpus_dir):
    source = [CorpusSource("sub/*.zh")]
    everything = texts(TextCorpusReader(source, pairs=False).read(str(corpus_dir)))
    shards = [texts(TextCorpusReader(source, pairs=False, num_shards=2, shard_index=k).read(str(corpus_dir)))
              for k in range(2)]
    assert shards[0] == everything[0::2] and shards[1] == everything[1::2]
    budget = texts(TextCorpusReader(source, pairs=False, max_chars=12).read(str(corpus_dir)))
    assert budget == everything[:2]  # 5 + 5 characters; a third would pass 12
    train = texts(TextCorpusReader(source, pairs=False, split="train", dev_fraction=0.5).read(str(corpus_dir)))
    dev = texts(TextCorpusReader(source, pairs=False, split="dev", dev_fraction=0.5).read(str(corpus_dir)))
    assert sorted(train + dev) == sorted(everything) and not set(train) & set(dev)


def test_raw_text_shards_partition_the_lines(tmp_path):
    path = tmp_path / "raw.txt"
    path.write_text("一\n\n二\n三\n四\n五\n", encoding="utf-8")
    shards = [[x["text"] for x in RawTextReader(num_shards=3, shard_index=k).read(str(path))] for k in range(3)]
    assert shards == [["一", "四"], ["二", "五"], ["三"]]
    with pytest.raises(ConfigurationError):
        RawTextReader(num_shards=2, shard_index=2)


def test_lattices_for_both_texts(corpus_dir):
    lexicon = corpus_dir / "lexicon.txt"
    lexicon.write_text("第二集\n北京\n", encoding="utf-8")
    reader = TextCorpusReader([CorpusSource("sub/*.zh"), CorpusSource("ner.bmes", ResumeNerReader())],
                              lattice_builder=LexiconBuilder(lexicon_path=str(lexicon)))
    reader.sources[0].document = True
    first, _, _, fourth, fifth = list(reader.read(str(corpus_dir)))
    assert [w[2] for w in first["lattice"].words()] == ["第二集"] == [w[2] for w in first["lattice_b"].words()]
    assert [w[2] for w in fourth["lattice"].words()] == ["北京"] and "lattice_b" not in fourth
    assert fifth["lattice"].n_words == 0


def test_bad_sources_are_errors_naming_the_path(corpus_dir):
    with pytest.raises(DataError, match="nothing.txt"):
        list(TextCorpusReader([CorpusSource("nothing.txt")]).read(str(corpus_dir)))
    with pytest.raises(DataError, match="no field 'context_chars'"):
        list(TextCorpusReader([CorpusSource("ner.bmes", ResumeNerReader(), ["context_chars"])]).read(str(corpus_dir)))
    with pytest.raises(DataError, match="reads a directory"):
        list(TextCorpusReader([CorpusSource("ner.bmes")]).read(str(corpus_dir / "ner.bmes")))
    (corpus_dir / "bad.txt").write_bytes("好\n".encode() + b"\xff\n")
    with pytest.raises(DataError, match=r"bad.txt:2"):
        list(TextCorpusReader([CorpusSource("bad.txt")]).read(str(corpus_dir)))
