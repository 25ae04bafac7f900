"""The ``bleu`` metric's choices beyond sacrebleu's defaults, each against sacrebleu as the oracle on
the real test sets: typographic quotes made ASCII on both sides (WMT22 writes ``it’s``, the
training targets ``it's``), mteval-v13a's brevity penalty (shortest reference) with ``nist_bp``,
and which BLEU ranks (cased for cased references)."""
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from multigrain.components.metrics.bleu import Bleu, normalize_quotes
from tests.components.metrics.test_bleu import perturbed, tvsub_references

CURLY = "\u2019\u2018\u201c\u201d"


def wmt22_references(data_dir) -> list[list[str]]:
    folder = data_dir / "wmt22_generaltest_zh_en"
    return [(folder / f"generaltest2022.zh-en.ref.{x}.en").read_text(encoding="utf-8").splitlines() for x in "AB"]


def scored(metric: Bleu, hypotheses: list[str], streams: list[list[str]]) -> dict:
    metric(hypotheses, [list(refs) for refs in zip(*streams)])
    return metric.get_metric(reset=True)


def test_quotes_are_made_ascii_in_hypotheses_and_references():
    assert normalize_quotes("It\u2019s \u201cfine\u201d, \u2018ok\u2019") == "It's \"fine\", 'ok'"
    metric = Bleu()
    got = scored(metric, ["It's \"fine\", he said ."], [["It\u2019s \u201cfine\u201d, he said ."]])
    assert got["bleu_cased"] == pytest.approx(100.0)
    raw = sacrebleu.corpus_bleu(["It's \"fine\", he said ."], [["It\u2019s \u201cfine\u201d, he said ."]])
    assert raw.score < 60  # what the same pair scored before: every quote a miss


def test_wmt22_with_ascii_hypotheses_equals_sacrebleu_on_normalised_text(data_dir):
    """A model trained on ASCII targets writes ``'``: scored against WMT22's curly references, with
    the normalisation its score equals sacrebleu on ASCII text on both sides, and is higher than
    sacrebleu on the raw references."""
    streams = wmt22_references(data_dir)
    assert [len(s) for s in streams] == [1875, 1875]
    assert [sum(any(c in line for c in CURLY) for line in s) for s in streams] == [490, 446]
    hypotheses = [h.translate(str.maketrans("\u2019\u2018\u201c\u201d", "''\"\"")) for h in perturbed(streams[1], 3)]
    assert not any(c in h for h in hypotheses for c in CURLY)
    got = scored(Bleu(), hypotheses, streams)
    ascii_streams = [[normalize_quotes(r) for r in s] for s in streams]
    for key, lowercase in (("bleu", True), ("bleu_cased", False)):
        oracle = sacrebleu.corpus_bleu(hypotheses, ascii_streams, lowercase=lowercase).score
        assert got[key] == pytest.approx(oracle, abs=1e-9)
        assert got[key] > sacrebleu.corpus_bleu(hypotheses, streams, lowercase=lowercase).score + 0.5
    assert got["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, ascii_streams).score, abs=1e-9)


def test_nist_bp_takes_the_shortest_reference_as_mteval_v13a(data_dir, tmp_path):
    """Oracle: sacrebleu's own n-gram statistics of the corpus, with the reference length replaced
    by the sum over sentences of the shortest reference (13a tokens), through ``BLEU.compute_bleu``."""
    streams = tvsub_references(str(data_dir / "tvsub_zh_en/processed/test/test_trg.sgm"), tmp_path)
    hypotheses = perturbed(streams[0], seed=4)  # a third of the words dropped: short hypotheses
    closest = scored(Bleu(), hypotheses, streams)
    metric = Bleu(nist_bp=True)
    shortest = scored(metric, hypotheses, streams)
    tokenize = Tokenizer13a()
    shortest_len = sum(min(len(tokenize(r).split()) for r in refs) for refs in zip(*streams))
    for key, lowercase in (("bleu", True), ("bleu_cased", False)):
        stats = sacrebleu.corpus_bleu(hypotheses, streams, lowercase=lowercase)
        assert stats.ref_len > shortest_len  # the closest reference is longer than the shortest
        oracle = BLEU.compute_bleu(stats.counts, stats.totals, stats.sys_len, shortest_len, "exp").score
        assert shortest[key] == pytest.approx(oracle, abs=1e-9)
        assert shortest[key] > closest[key]  # a smaller brevity penalty for short hypotheses
        assert closest[key] == pytest.approx(stats.score, abs=1e-9)
    assert shortest["chrf"] == closest["chrf"]
    assert metric.signature() == "nrefs:3|case:lc|eff:no|tok:13a|smooth:exp|bp:shortest|version:2.6.0"


def test_one_reference_gives_the_same_score_with_either_brevity_penalty(data_dir):
    references = wmt22_references(data_dir)[0][:300]
    hypotheses = perturbed(references, seed=5)
    assert scored(Bleu(nist_bp=True), hypotheses, [references]) == scored(Bleu(), hypotheses, [references])


def test_the_ranking_bleu_follows_the_case_of_the_references():
    metric = Bleu()
    scored(metric, ["The cat sat ."], [["the cat sat ."], ["a cat sat ."]])  # two streams
    assert metric.ranking_key() == "bleu" and metric.signature().startswith("nrefs:2|case:lc|")
    scored(metric, ["The cat sat ."], [["The cat sat ."], ["a cat sat ."]])
    assert metric.ranking_key() == "bleu_cased" and metric.signature().startswith("nrefs:2|case:mixed|")
    assert metric.signature("bleu").startswith("nrefs:2|case:lc|")
    with pytest.raises(ValueError, match="no signature of 'chrf'"):
        metric.signature("chrf")
