"""Accuracy / macro F1 and the CMRC 2018 EM/F1 on hand-computed cases."""
import random

import pytest
from sklearn.metrics import accuracy_score, f1_score

from multigrain.components.metrics.accuracy import Accuracy
from multigrain.components.metrics.mrc import MrcEmF1, exact_match, f1_score as mrc_f1, mixed_segmentation


def test_accuracy_and_macro_f1_by_hand():
    metric = Accuracy()
    metric([0, 1, 1], [0, 1, 2])
    metric([2, 2, 2], [2, 1, 0])
    got = metric.get_metric(reset=True)
    # correct 3 of 6; per-class F1 = 2TP / (predicted + gold): 0 -> 2/3, 1 -> 2/4, 2 -> 2/5
    assert got["accuracy"] == pytest.approx(0.5)
    assert got["macro_f1"] == pytest.approx((2 / 3 + 0.5 + 0.4) / 3)
    assert metric.get_metric() == {"accuracy": 0.0, "macro_f1": 0.0}


def test_accuracy_matches_scikit_learn():
    rng = random.Random(3)
    gold = [rng.choice("abcd") for _ in range(200)]
    pred = [g if rng.random() < 0.6 else rng.choice("abcde") for g in gold]
    metric = Accuracy()
    for i in range(0, 200, 32):
        metric(pred[i:i + 32], gold[i:i + 32])
    got = metric.get_metric()
    assert got["accuracy"] == pytest.approx(accuracy_score(gold, pred))
    assert got["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro"))


def test_mixed_segmentation():
    assert mixed_segmentation("北京2008年Olympic Games！") == ["北", "京", "2008", "年", "olympic", "games"]
    assert mixed_segmentation("a-b 《c》") == ["ab", "c"]  # removed punctuation does not end a Latin run


@pytest.mark.parametrize("prediction,references,em,f1", [
    ("北京大学", ["北京大学"], 1.0, 1.0),
    ("北京", ["北京大学"], 0.0, 2 * 1.0 * 0.5 / 1.5),             # P = 2/2, R = 2/4
    ("《红楼梦》", ["红楼梦"], 1.0, 1.0),                          # punctuation stripped
    ("北京，上海", ["北京上海"], 1.0, 1.0),
    ("1998年", ["1997年", "1998年"], 1.0, 1.0),                    # max over the references
    ("1997年", ["1998年"], 0.0, 0.5),                             # tokens 1997|年 vs 1998|年: P = R = 1/2
    ("甲乙丙丁", ["甲丙丁乙"], 0.0, 0.5),                          # contiguous 丙丁; a subsequence has 3
    ("iPhone 12 手机", ["iphone12"], 0.0, 0.0),
    ("", ["北京"], 0.0, 0.0),
    ("第三届亚洲杯", ["亚洲杯", "第三届"], 0.0, 2 * 0.5 * 1.0 / 1.5),  # 3 of 6 tokens, both references
])
def test_cmrc_em_and_f1_by_hand(prediction, references, em, f1):
    assert exact_match(prediction, references) == em
    assert mrc_f1(prediction, references) == pytest.approx(f1)


def test_cmrc_corpus_means():
    metric = MrcEmF1()
    metric(["北京大学", "北京"], [["北京大学"], ["北京大学"]])
    metric(["甲乙丙丁"], [["甲丙丁乙"]])
    got = metric.get_metric(reset=True)
    assert got["em"] == pytest.approx(1 / 3)
    assert got["f1"] == pytest.approx((1 + 2 / 3 + 0.5) / 3)
    with pytest.raises(ValueError, match="reference"):
        metric(["x"], [[]])
