"""Exact match and F1 for extractive MRC, computed the way the CMRC 2018 evaluation script does.

Re-implemented from the description of the official ``cmrc2018_evaluate.py``:

- Both strings are lower-cased and stripped.
- **F1** works on a *mixed segmentation*: every CJK character in U+4E00..U+9FA5 is a token of
  its own; the text between them (Latin letters, digits, other symbols) is split into words.
  The characters of ``PUNCTUATION`` are removed first (a removed character does not end a
  Latin run: ``"a-b"`` is the one token ``"ab"``, as in the script). Precision and recall come
  from the longest common *contiguous* run of tokens (the script's ``find_lcs`` is a longest
  common substring over the token lists, not a subsequence).
- **EM** compares the strings with the ``PUNCTUATION`` characters removed (nothing else).
- Both are the maximum over the reference answers; the corpus figure is the mean (0..1).

One deviation: the script splits Latin runs with ``nltk.word_tokenize``; nltk is not a
dependency here, so ``_latin_words`` splits on whitespace and keeps every other non-word
symbol as a token of its own, keeping ``3.5``, ``1,000`` and ``don't`` whole. The two agree on
the digits, names and abbreviations found in Chinese answers.
"""
from __future__ import annotations

import re
from typing import Sequence

from multigrain.platform.kinds import Metric

#: the script's ``sp_char`` list (its two-character entry "……" never matches a single character)
PUNCTUATION = frozenset("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』")
_CJK = re.compile(r"[\u4e00-\u9fa5]")
_LATIN_TOKEN = re.compile(r"\w+(?:[.,'’]\w+)*|[^\w\s]")


def _latin_words(text: str) -> list[str]:
    return _LATIN_TOKEN.findall(text)


def mixed_segmentation(text: str, remove_punctuation: bool = True) -> list[str]:
    """CJK characters one by one, Latin/digit runs as words (see the module docstring)."""
    tokens: list[str] = []
    run = ""
    for ch in str(text).lower().strip():
        if remove_punctuation and ch in PUNCTUATION:
            continue
        if _CJK.match(ch) or ch in PUNCTUATION:
            if run:
                tokens.extend(_latin_words(run))
                run = ""
            tokens.append(ch)
        else:
            run += ch
    if run:
        tokens.extend(_latin_words(run))
    return tokens


def strip_punctuation(text: str) -> str:
    return "".join(ch for ch in str(text).lower().strip() if ch not in PUNCTUATION)


def longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest contiguous token run common to ``a`` and ``b`` (O(|a|·|b|))."""
    best = 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def f1_score(prediction: str, references: Sequence[str]) -> float:
    pred = mixed_segmentation(prediction)
    best = 0.0
    for ref in references:
        gold = mixed_segmentation(ref)
        common = longest_common_run(gold, pred)
        if common == 0:
            continue
        precision, recall = common / len(pred), common / len(gold)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def exact_match(prediction: str, references: Sequence[str]) -> float:
    pred = strip_punctuation(prediction)
    return float(any(strip_punctuation(ref) == pred for ref in references))


@Metric.register("mrc_em_f1")
class MrcEmF1(Metric):
    """Mean EM and F1 over questions, CMRC 2018 style: ``{"em", "f1"}`` in [0, 1]."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.em_total = 0.0
        self.f1_total = 0.0
        self.count = 0

    def __call__(self, predictions: Sequence[str], references: Sequence[Sequence[str]]) -> None:
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} reference lists")
        for pred, refs in zip(predictions, references):
            if not refs:
                raise ValueError("a question without reference answers cannot be scored")
            self.em_total += exact_match(pred, refs)
            self.f1_total += f1_score(pred, refs)
            self.count += 1

    def get_metric(self, reset: bool = False) -> dict[str, float]:
        n = self.count
        result = {"em": self.em_total / n if n else 0.0, "f1": self.f1_total / n if n else 0.0}
        if reset:
            self.reset()
        return result
