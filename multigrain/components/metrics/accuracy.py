"""Accuracy and macro F1 for classification and sentence pairs."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from multigrain.platform.kinds import Metric


@Metric.register("accuracy")
class Accuracy(Metric):
    """``accuracy`` = correct / total; ``macro_f1`` = unweighted mean of the per-class F1 over
    the classes that occur in the gold labels or the predictions (scikit-learn's
    ``f1_score(average="macro")``). Labels may be ints or strings; both values are in [0, 1].
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.correct = 0
        self.total = 0
        self.true_positives: Counter = Counter()
        self.predicted: Counter = Counter()
        self.gold: Counter = Counter()
        self.pairs: Counter = Counter()  # (gold, predicted) -> count: the confusion matrix

    def __call__(self, predictions: Iterable, gold: Iterable) -> None:
        predictions, gold = list(predictions), list(gold)
        if len(predictions) != len(gold):
            raise ValueError(f"{len(predictions)} predictions but {len(gold)} gold labels")
        for p, g in zip(predictions, gold):
            self.total += 1
            self.predicted[p] += 1
            self.gold[g] += 1
            self.pairs[g, p] += 1
            if p == g:
                self.correct += 1
                self.true_positives[g] += 1

    def get_metric(self, reset: bool = False) -> dict[str, float]:
        accuracy = self.correct / self.total if self.total else 0.0
        f1s = []
        for label in set(self.gold) | set(self.predicted):
            tp = self.true_positives[label]
            denom = self.predicted[label] + self.gold[label]
            f1s.append(2 * tp / denom if denom else 0.0)
        result = {"accuracy": accuracy, "macro_f1": sum(f1s) / len(f1s) if f1s else 0.0}
        if reset:
            self.reset()
        return result
