"""The ``bleu`` metric against sacrebleu called directly, on the real multi-reference test sets:
TVsub's 3-reference SGML (read by ``readers/nist.py``'s parser) and WMT22's references A/B."""
import random
import re

import pytest
import sacrebleu

from multigrain.components.metrics.bleu import Bleu, reference_streams
from multigrain.components.readers.nist import parse_sgm


def perturbed(sentences: list[str], seed: int) -> list[str]:
    """Each sentence with about a third of its words dropped, swapped or upper-cased."""
    rng = random.Random(seed)
    out = []
    for s in sentences:
        words = s.split()
        kept = []
        for w in words:
            roll = rng.random()
            if roll < 0.12:
                continue
            kept.append(w.upper() if roll < 0.2 else w)
        if len(kept) > 2 and rng.random() < 0.3:
            kept[0], kept[1] = kept[1], kept[0]
        out.append(" ".join(kept) or "x")
    return out


def tvsub_references(sgm: str, tmp_path) -> list[list[str]]:
    """The three reference streams of the TVsub test SGML: its ``<DOC>`` blocks grouped by
    ``sysid`` into one file each, each parsed by ``parse_sgm``."""
    text = open(sgm, encoding="utf-8").read()
    header = text[:text.index("<DOC")]
    blocks = re.findall(r'<DOC[^>]*sysid="([^"]+)"[^>]*>.*?</DOC>', text, flags=re.S)
    by_system: dict[str, list[str]] = {}
    for match in re.finditer(r'<DOC[^>]*sysid="([^"]+)"[^>]*>.*?</DOC>', text, flags=re.S):
        by_system.setdefault(match.group(1), []).append(match.group(0))
    assert sorted(by_system) == ["reference_1", "reference_2", "reference_3"] and len(blocks) == 6
    streams = []
    for system, docs in sorted(by_system.items()):
        path = tmp_path / f"{system}.sgm"
        path.write_text(header + "\n".join(docs) + "\n</refset>\n", encoding="utf-8")
        streams.append([segment.text for segment in parse_sgm(str(path)).segments.values()])
    return streams


def fed_in_batches(metric: Bleu, hypotheses: list[str], references: list[list[str]], size: int = 100) -> dict:
    for i in range(0, len(hypotheses), size):
        metric(hypotheses[i:i + size], references[i:i + size])
    return metric.get_metric(reset=True)


def test_three_tvsub_reference_streams_equal_sacrebleu(data_dir, tmp_path):
    streams = tvsub_references(str(data_dir / "tvsub_zh_en/processed/test/test_trg.sgm"), tmp_path)
    assert [len(s) for s in streams] == [1154] * 3
    hypotheses = perturbed(streams[0], seed=1)
    metric = Bleu()
    got = fed_in_batches(metric, hypotheses, [list(refs) for refs in zip(*streams)])
    lowercase = sacrebleu.corpus_bleu(hypotheses, streams, lowercase=True)
    assert got["bleu"] == pytest.approx(lowercase.score, abs=1e-9)
    assert got["bleu_cased"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, streams).score, abs=1e-9)
    assert got["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, streams).score, abs=1e-9)
    # the upper-cased words count in the cased score only; the three references beat one
    assert 20 < got["bleu_cased"] < got["bleu"] < 100
    assert got["bleu"] > sacrebleu.corpus_bleu(hypotheses, streams[:1], lowercase=True).score
    # TVsub's references are lower-cased: the case-insensitive BLEU ranks
    assert metric.ranking_key() == "bleu" and metric.last == {"sentences": 1154, "reference_streams": 3,
                                                              "cased_references": False}
    assert metric.signature() == "nrefs:3|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0"


def test_two_wmt22_reference_streams_equal_sacrebleu(data_dir):
    folder = data_dir / "wmt22_generaltest_zh_en"
    streams = [(folder / f"generaltest2022.zh-en.ref.{x}.en").read_text(encoding="utf-8").splitlines()
               for x in "AB"]
    assert [len(s) for s in streams] == [1875, 1875]
    streams = [s[:500] for s in streams]  # the first 500 segments: the test stays fast
    hypotheses = perturbed(streams[1], seed=2)
    metric = Bleu(tokenize="intl")
    got = fed_in_batches(metric, hypotheses, [list(refs) for refs in zip(*streams)], size=64)
    assert got["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(hypotheses, streams, lowercase=True, tokenize="intl").score, abs=1e-9)
    assert got["bleu_cased"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, streams, tokenize="intl").score,
                                              abs=1e-9)
    assert got["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, streams).score, abs=1e-9)
    # WMT's references are cased: the cased BLEU ranks, and the signature is its signature
    assert metric.ranking_key() == "bleu_cased" and metric.last["reference_streams"] == 2
    assert metric.signature().startswith("nrefs:2|case:mixed|eff:no|tok:intl|")
    assert metric.signature("bleu").startswith("nrefs:2|case:lc|eff:no|tok:intl|")


def test_a_different_number_of_references_per_sentence():
    references = [["the cat sat on the mat", "a cat was on the mat"], ["he left"], ["it rains", "rain", "wet"]]
    hypotheses = ["the cat sat on a mat", "he has left", "it rains"]
    streams = reference_streams(references)
    assert streams == [["the cat sat on the mat", "he left", "it rains"], ["a cat was on the mat", None, "rain"],
                       [None, None, "wet"]]
    metric = Bleu()
    metric(hypotheses, references)
    got = metric.get_metric()
    assert got["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, streams, lowercase=True).score)
    assert metric.signature().startswith("nrefs:var|")
    assert metric.get_metric(reset=True) == got and metric.get_metric() == {"bleu": 0.0, "bleu_cased": 0.0,
                                                                            "chrf": 0.0}


def test_bad_input_is_one_clear_error():
    metric = Bleu()
    with pytest.raises(ValueError, match="sentence 1 has no reference"):
        metric(["a", "b"], [["a"], []])
    with pytest.raises(ValueError, match="2 hypotheses but references for 1 sentences"):
        metric(["a", "b"], [["a"]])
    assert metric.hypotheses == []  # nothing half-added
    with pytest.raises(Exception, match="nosuch|tokeniz"):
        Bleu(tokenize="nosuch")
