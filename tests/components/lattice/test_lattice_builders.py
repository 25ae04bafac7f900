"""Lattice builders against brute force: lexicon matches, segmenter partitions, voting, union."""
import random

import numpy as np
import pytest

from multigrain.components.lattice.builder import LatticeBuilder
from multigrain.components.lattice.lexicon import LexiconBuilder, read_word_list
from multigrain.components.lattice.segmenters import (
    SegmenterBuilder,
    VotingBuilder,
    partition,
    segment_cuts,
    vote,
)
from multigrain.components.lattice.types import Lattice
from multigrain.components.lattice.union import UnionBuilder
from multigrain.platform.errors import ConfigurationError

# characters of several code points (a Latin word kept whole, emoji, a ZWJ family) on purpose
ALPHABET = ["a", "b", "c", "ab", "ba", "😀", "👨\u200d👩\u200d👧", "中"]
CODE_POINTS = "abc😀👨\u200d👩\u200d👧中"


def brute_force_words(chars, lexicon, min_length, max_length):
    n = len(chars)
    return [
        (s, e)
        for s in range(n)
        for e in range(s + min_length - 1, min(n, s + max_length))
        if "".join(chars[s : e + 1]) in lexicon
    ]


def write_lexicon(path, words, vec=False):
    with open(path, "w", encoding="utf-8") as f:
        if vec:
            f.write(f"{len(words)} 2\n")
        for w in words:
            f.write(f"{w} 0.1 0.2\n" if vec else f"{w}\n")


def test_lexicon_finds_exactly_every_occurrence(tmp_path):
    rng = random.Random(0)
    for case in range(40):
        lexicon = {"".join(rng.choices(CODE_POINTS, k=rng.randint(1, 6))) for _ in range(rng.randint(1, 60))}
        # plus whole multi-code-point tokens and pieces of them, which must never match inside one
        lexicon |= {"ab", "ba", "b😀", "aba", "👨", "👩\u200d👧"}
        path = tmp_path / f"lex{case}.txt"
        write_lexicon(path, sorted(lexicon), vec=case % 2 == 1)
        min_length, max_length = rng.randint(1, 3), rng.randint(3, 6)
        builder = LexiconBuilder(lexicon_path=str(path), min_length=min_length, max_length=max_length)
        sentences = [[rng.choice(ALPHABET) for _ in range(rng.randint(0, 14))] for _ in range(10)]
        for chars, lat in zip(sentences, builder.build_many(sentences)):
            lat.validate()
            assert lat.chars == tuple(chars)
            want = brute_force_words(chars, lexicon, min_length, max_length)
            assert [(s, e) for s, e, _ in lat.words()] == sorted(want)
            assert lat.sources[lat.n_chars :].tolist() == [1] * len(want)
        assert builder.build(sentences[0]) == builder.build_many(sentences[:1])[0]


def test_lexicon_never_splits_multi_code_point_characters(tmp_path):
    path = tmp_path / "lex.txt"
    write_lexicon(path, ["Apple公司", "le公", "pp", "公司", "😀了", "👩\u200d👧了"])
    lat = LexiconBuilder(lexicon_path=str(path)).build(["Apple", "公", "司", "👨\u200d👩\u200d👧", "了", "😀", "了"])
    assert lat.words() == [(0, 2, "Apple公司"), (1, 2, "公司"), (5, 6, "😀了")]
    # a sentence whose characters are all one code point, then one with a long token, in one call
    lats = LexiconBuilder(lexicon_path=str(path)).build_many([list("公司"), ["x", "Apple", "公", "司"]])
    assert [l.words() for l in lats] == [[(0, 1, "公司")], [(1, 3, "Apple公司"), (2, 3, "公司")]]


def test_lexicon_vocabulary_filter_and_vec_header(tmp_path):
    lex, vocab = tmp_path / "lex.txt", tmp_path / "emb.vec"
    write_lexicon(lex, ["北京", "天安门", "北京天安门"])
    write_lexicon(vocab, ["天安门", "其他"], vec=True)
    assert read_word_list(str(vocab))[0] == ["天安门", "其他"]
    lat = LexiconBuilder(lexicon_path=str(lex), vocabulary_path=str(vocab)).build(list("我爱北京天安门"))
    assert lat.words() == [(4, 6, "天安门")]
    assert LexiconBuilder(lexicon_path=str(lex), max_length=2).build(list("北京天安门")).words() == [(0, 1, "北京")]
    with pytest.raises(ConfigurationError):
        LexiconBuilder(lexicon_path=str(tmp_path / "missing.txt"))


def test_default_lexicon_is_jiebas_dictionary():
    lat = LexiconBuilder().build(list("南京市长江大桥"))
    words = {w for _, _, w in lat.words()}
    assert {"南京", "南京市", "市长", "长江", "长江大桥", "大桥"} <= words
    assert all(len(w) >= 2 for w in words)


def test_spec_key_changes_with_settings(tmp_path):
    path = tmp_path / "lex.txt"
    write_lexicon(path, ["ab"])
    a = LexiconBuilder(lexicon_path=str(path)).spec_key()
    assert a == LexiconBuilder(lexicon_path=str(path)).spec_key()
    assert a != LexiconBuilder(lexicon_path=str(path), max_length=5).spec_key()
    write_lexicon(path, ["ab", "bc"])
    assert a != LexiconBuilder(lexicon_path=str(path)).spec_key()  # content, not only the name


def partition_literal(chars, segments):
    """Boundaries of the joined text kept only where they fall between two characters."""
    text = "".join(chars)
    cuts = set(segment_cuts(text, segments))
    out, w, pos = [], 0, 0
    for i, c in enumerate(chars):
        out.append(w)
        pos += len(c)
        if pos in cuts:
            w += 1
    return out


def test_segment_alignment_rules():
    # a segmenter that drops whitespace (snownlp): each dropped character is its own segment
    assert segment_cuts("ab  cd", ["ab", "cd"]) == [2, 3, 4, 6]
    # a normalised segment that is not found: taken to cover its length
    assert segment_cuts("ＡＢ中", ["AB", "中"]) == [2, 3]
    # characters the segmenter never reached are single segments
    assert segment_cuts("abcd", ["ab"]) == [2, 3, 4]
    # a boundary inside a multi-code-point character is dropped: the two segments merge
    assert partition(["iPh", "one", "拍"], ["iPhone", "拍"]).tolist() == [0, 0, 1]
    assert partition(["ab", "c", "d"], ["a", "bc", "d"]).tolist() == [0, 0, 1]
    rng = random.Random(1)
    for _ in range(200):
        chars = [rng.choice(ALPHABET) for _ in range(rng.randint(1, 10))]
        text, segments, pos = "".join(chars), [], 0
        while pos < len(text):
            k = rng.randint(1, 4)
            segments.append(text[pos : pos + k])
            pos += k
        got = partition(chars, segments).tolist()
        assert got == partition_literal(chars, segments)
        assert got[0] == 0 and all(0 <= b - a <= 1 for a, b in zip(got, got[1:]))


@pytest.mark.parametrize("name", ["jieba", "snownlp", "lac"])
def test_segmenters_partition_the_characters(name):
    sentences = [list("我爱北京天安门"), ["我", "用", "iPhone12", " ", "拍", "照", "😀"], [], list("　南京市长江大桥。")]
    lats = SegmenterBuilder(name).build_many(sentences)
    for chars, lat in zip(sentences, lats):
        lat.validate()
        assert lat.chars == tuple(chars) and lat.seg_ids.shape == (1, len(chars))
        seg = lat.seg_ids[0].tolist()
        # words = exactly the partition's segments of two or more characters
        groups = {}
        for i, w in enumerate(seg):
            groups.setdefault(w, []).append(i)
        want = [(g[0], g[-1]) for g in groups.values() if len(g) >= 2]
        assert [(s, e) for s, e, _ in lat.words()] == want
    assert {"北京", "天安门"} <= {w for _, _, w in lats[0].words()}


def test_thulac_missing_is_a_clear_error():
    try:
        import thulac  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigurationError, match=r"pip install 'multigrain\[thulac\]'"):
            SegmenterBuilder("thulac").build(list("你好"))
    else:
        pytest.skip("thulac is installed")
    with pytest.raises(ConfigurationError):
        SegmenterBuilder("pkuseg")


def vote_literal(chars_count, partitions_):
    """HRMF: count each (start, end) over segmenters; from the current start take the span with
    most votes among spans starting there, ties to the longer; jump past it."""
    votes = {}
    for seg in partitions_:
        start = 0
        for i in range(1, chars_count + 1):
            if i == chars_count or seg[i] != seg[i - 1]:
                votes[(start, i - 1)] = votes.get((start, i - 1), 0) + 1
                start = i
    out, cur = [], 0
    while cur < chars_count:
        cands = [(v, e - s, (s, e)) for (s, e), v in votes.items() if s == cur]
        best = max(cands)[2]
        out.append(best)
        cur = best[1] + 1
    seg = [0] * chars_count
    for w, (s, e) in enumerate(out):
        for i in range(s, e + 1):
            seg[i] = w
    return seg


def test_vote_equals_literal_rule():
    rng = random.Random(2)
    for _ in range(300):
        n = rng.randint(1, 12)
        parts = []
        for _ in range(rng.randint(1, 4)):
            row, w = [0], 0
            for _ in range(n - 1):
                w += rng.random() < 0.5
                row.append(w)
            parts.append(np.array(row, dtype=np.int64))
        assert vote(parts).tolist() == vote_literal(n, [p.tolist() for p in parts])
    # ties go to the longer span: (0,1) and (0,0)+(1,1) one vote each at start 0
    assert vote([np.array([0, 0, 1]), np.array([0, 1, 2])]).tolist() == [0, 0, 1]


def test_voting_builder_rows():
    sentences = [list("南京市长江大桥"), ["我", "用", "iPhone12"]]
    voting = VotingBuilder(["jieba", "snownlp", "lac"], keep_all=True)
    singles = [SegmenterBuilder(n).build_many(sentences) for n in ["jieba", "snownlp", "lac"]]
    for b, lat in enumerate(voting.build_many(sentences)):
        lat.validate()
        rows = [s[b].seg_ids[0] for s in singles]
        assert lat.seg_ids.shape == (4, len(sentences[b]))
        assert lat.seg_ids[0].tolist() == vote_literal(len(sentences[b]), [r.tolist() for r in rows])
        assert [r.tolist() for r in lat.seg_ids[1:]] == [r.tolist() for r in rows]
    assert VotingBuilder(["jieba", "lac"]).build(sentences[0]).seg_ids.shape == (1, 7)


class FixedWords(LatticeBuilder):
    """Test builder: proposes given spans (and a seg row) for every sentence."""

    def __init__(self, spans, seg=False):
        self.spans, self.seg = spans, seg

    def spec_key(self):
        return self._spec(spans=self.spans, seg=self.seg)

    def build(self, chars):
        n = len(chars)
        words = [(s, e) for s, e in self.spans if e < n]
        return Lattice.from_words(chars, words, seg_ids=[list(range(n))] if self.seg else None)


def test_union_sources_bitmask():
    rng = random.Random(3)
    for _ in range(100):
        k = rng.randint(1, 4)
        proposals = []
        for _ in range(k):
            spans = set()
            for _ in range(rng.randint(0, 6)):
                s = rng.randrange(6)
                spans.add((s, rng.randrange(s, 6)))
            proposals.append(sorted(spans))
        with_seg = [rng.random() < 0.5 for _ in range(k)]
        union = UnionBuilder([FixedWords(p, sg) for p, sg in zip(proposals, with_seg)])
        sentences = [list("abcdef"), list("abc")]
        for chars, lat in zip(sentences, union.build_many(sentences)):
            lat.validate()
            n = len(chars)
            want = {}
            for bit, spans in enumerate(proposals):
                for s, e in spans:
                    if e < n:
                        want[(s, e)] = want.get((s, e), 0) | (1 << bit)
            assert {(s, e): int(src) for (s, e, _), src in zip(lat.words(), lat.sources[n:])} == want
            if any(with_seg):
                assert lat.seg_ids.shape == (sum(with_seg), n)
            else:
                assert lat.seg_ids is None


def test_union_of_lexicon_and_segmenter():
    union = UnionBuilder([LexiconBuilder(), SegmenterBuilder("jieba")])
    lat = union.build(list("南京市长江大桥"))
    lex = {(s, e) for s, e, _ in LexiconBuilder().build(list("南京市长江大桥")).words()}
    seg = {(s, e) for s, e, _ in SegmenterBuilder("jieba").build(list("南京市长江大桥")).words()}
    got = {(s, e): int(src) for (s, e, _), src in zip(lat.words(), lat.sources[lat.n_chars :])}
    assert got == {sp: (sp in lex) | ((sp in seg) << 1) for sp in lex | seg}
    assert lat.seg_ids.shape == (1, 7)


def test_base_builder_needs_an_override():
    class Nothing(LatticeBuilder):
        def spec_key(self):
            return self._spec()

    with pytest.raises(NotImplementedError):
        Nothing().build_many([list("ab")])
    assert json_type(Nothing().spec_key()).endswith("Nothing")  # unregistered: the class name
    assert json_type(LexiconBuilder().spec_key()) == "lexicon"


def json_type(spec_key):
    import json

    return json.loads(spec_key)["type"]
