"""``multigrain.testing``: the tagger overfit data and the hand scorers of ``predict`` output."""
import pytest

from multigrain.platform.data import Instance
from multigrain.testing import score_answers, score_entities, score_labels


def test_overfit_data_has_nested_words(tagger_overfit_data):
    """The lexicon gives the lattice builders something to do: words in every sentence."""
    from multigrain.components.lattice.lexicon import LexiconBuilder

    sentences = tagger_overfit_data.sentences
    assert len(sentences) == 20 and all(len(s) <= 40 for s in sentences)
    assert tagger_overfit_data.train.read_text(encoding="utf-8").count("\n\n") == 20
    lattices = LexiconBuilder(lexicon_path=str(tagger_overfit_data.lexicon)).build_many(
        [[c for c, _ in s] for s in sentences])
    assert sum(lat.n_words for lat in lattices) > 100
    assert all(lat.n_words > 0 for lat in lattices)


class BmesTagger:
    scheme = "BMES"


def test_entities_are_scored_against_the_gold_tags():
    gold = [Instance({"tags": ["B-ORG", "E-ORG", "O", "S-LOC"]}), Instance({"tags": ["O", "S-PER"]})]
    predicted = [{"entities": [{"label": "ORG", "start": 0, "end": 2}, {"label": "LOC", "start": 2, "end": 3}]},
                 {"entities": [{"label": "PER", "start": 1, "end": 2}]}]
    scores = score_entities(BmesTagger(), predicted, gold)
    assert scores["precision"] == pytest.approx(2 / 3) and scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 / 3)


def test_labels_are_scored_by_accuracy_and_macro_f1():
    gold = [Instance({"label": g}) for g in ["a", "a", "b", "b"]]
    scores = score_labels(None, [{"label": p} for p in ["a", "b", "b", "b"]], gold)
    # a: P 1, R 1/2 -> F1 2/3; b: P 2/3, R 1 -> F1 4/5
    assert scores == {"accuracy": 0.75, "macro_f1": pytest.approx((2 / 3 + 4 / 5) / 2)}


def test_answers_are_scored_over_the_questions_with_references():
    gold = [Instance({"answers": [{"text": "北京", "answer_start": 0}]}),
            Instance({"answers": [{"text": "上海市", "answer_start": 0}], "answer_texts": ["上海"]}),
            Instance({"answers": []})]
    scores = score_answers(None, [{"answer": "北京。"}, {"answer": "上海市"}, {"answer": "x"}], gold)
    # EM ignores the punctuation: 1 + 0; F1: 1 + (P 2/3, R 1 -> 4/5)
    assert scores == {"em": 0.5, "f1": pytest.approx((1 + 4 / 5) / 2)}
