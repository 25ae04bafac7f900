"""Span-level (entity) precision, recall and F1 for NER, computed from BIO/BIOES/BMES tags.

An entity counts as correct when its type, start and end all equal a gold entity of the same
sentence. Span rules are seqeval's strict mode (see :mod:`multigrain.components.tag_schemes`);
the numbers equal ``seqeval.metrics.f1_score(..., mode="strict", scheme=IOB2|IOBES)`` (BMES with
M- read as I-), which the tests check.
"""
from __future__ import annotations

from collections import Counter
from typing import Optional

from multigrain.components.tag_schemes import check_scheme, detect_scheme, extract_spans
from multigrain.platform.kinds import Metric


def _prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    denom = precision + recall
    return precision, recall, (2 * precision * recall / denom if denom else 0.0)


@Metric.register("span_f1")
class SpanF1(Metric):
    """Micro P/R/F1 over entities, plus per-type F1 (``f1-PER``) and a per-type :meth:`report`.

    ``scheme``: ``"BIO"``, ``"BIOES"`` or ``"BMES"``. When None it is detected from the tags
    seen; sentences are held back while those tags fit more than one scheme (only B-/I-/O so
    far) and read as BIO if nothing decides by :meth:`get_metric`. Models that know their label
    set should pass ``detect_scheme(labels)``.
    """

    def __init__(self, scheme: Optional[str] = None) -> None:
        self.scheme = None if scheme is None else check_scheme(scheme)
        self._pending: list[tuple[list[str], list[str]]] = []
        self._pending_tags: set[str] = set()
        self.reset()

    def reset(self) -> None:
        self.true_positives: Counter = Counter()
        self.predicted: Counter = Counter()
        self.gold: Counter = Counter()
        self._pending = []
        self._pending_tags = set()

    def __call__(self, predictions: list[list[str]], gold: list[list[str]]) -> None:
        """Adds sentences: ``predictions[i]`` and ``gold[i]`` are the tags of sentence i."""
        if len(predictions) != len(gold):
            raise ValueError(f"{len(predictions)} predicted sentences but {len(gold)} gold ones")
        for i, (pred, true) in enumerate(zip(predictions, gold)):
            if len(pred) != len(true):
                raise ValueError(f"sentence {i}: {len(pred)} predicted tags but {len(true)} gold tags")
        if self.scheme is None:
            self._pending.extend((list(p), list(g)) for p, g in zip(predictions, gold))
            for seq in (*predictions, *gold):
                self._pending_tags.update(seq)
            if any(t[:2] in ("M-", "E-", "S-") for t in self._pending_tags):
                self._flush(detect_scheme(sorted(self._pending_tags)))
            return
        for pred, true in zip(predictions, gold):
            self._count(pred, true)

    def _flush(self, scheme: str) -> None:
        self.scheme = scheme
        pending, self._pending, self._pending_tags = self._pending, [], set()
        for pred, true in pending:
            self._count(pred, true)

    def _count(self, pred: list[str], true: list[str]) -> None:
        pred_spans = set(extract_spans(pred, self.scheme))
        gold_spans = set(extract_spans(true, self.scheme))
        self.predicted.update(t for t, _, _ in pred_spans)
        self.gold.update(t for t, _, _ in gold_spans)
        self.true_positives.update(t for t, _, _ in pred_spans & gold_spans)

    def _settle(self) -> None:
        if self._pending:
            self._flush(detect_scheme(sorted(self._pending_tags)))

    def _types(self) -> list[str]:
        return sorted(set(self.predicted) | set(self.gold))

    def get_metric(self, reset: bool = False) -> dict[str, float]:
        """``precision``, ``recall``, ``f1`` (micro, in [0, 1]) and ``f1-<type>`` per type
        seen in gold or predicted entities."""
        self._settle()
        p, r, f = _prf(sum(self.true_positives.values()), sum(self.predicted.values()), sum(self.gold.values()))
        out = {"precision": p, "recall": r, "f1": f}
        for type_ in self._types():
            out[f"f1-{type_}"] = _prf(self.true_positives[type_], self.predicted[type_], self.gold[type_])[2]
        if reset:
            self.reset()
        return out

    def report(self) -> dict[str, dict[str, float]]:
        """Per type: ``{"precision", "recall", "f1", "support"}`` (support = gold entities)."""
        self._settle()
        out = {}
        for type_ in self._types():
            p, r, f = _prf(self.true_positives[type_], self.predicted[type_], self.gold[type_])
            out[type_] = {"precision": p, "recall": r, "f1": f, "support": self.gold[type_]}
        return out

