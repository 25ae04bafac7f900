"""Corpus BLEU and chrF through sacrebleu, with every reference of every sentence.

``__call__(hypotheses, references)`` adds sentences: ``references[i]`` holds every reference of
sentence ``i``. sacrebleu takes references as *streams* (stream ``j`` = the ``j``-th reference of
every sentence); the sentences are transposed into ``max_i len(references[i])`` streams, a
sentence with fewer references padded with ``None``, which sacrebleu reads as "no reference"
(its signature then says ``nrefs:var``). A sentence without any reference is a ValueError.

``get_metric`` gives, on sacrebleu's 0-100 scale:

- ``bleu``: case-insensitive corpus BLEU (``lowercase=True``, as NIST reports it);
- ``bleu_cased``: the same with case kept;
- ``chrf``: chrF (character 6-grams, beta 2; case kept, sacrebleu's default).

``signature()`` is sacrebleu's signature string of the case-insensitive BLEU
(``nrefs:3|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0``).
"""
from __future__ import annotations

from typing import Optional, Sequence

from multigrain.platform.kinds import Metric


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[Optional[str]]]:
    """Per-sentence reference lists -> sacrebleu's streams, short lists padded with None."""
    width = max((len(r) for r in references), default=0)
    return [[refs[j] if j < len(refs) else None for refs in references] for j in range(width)]


@Metric.register("bleu")
class Bleu(Metric):
    """Corpus BLEU (case-insensitive and cased) and chrF over the sentences added since the last
    reset (see the module docstring). ``tokenize``: sacrebleu's tokenizer name (``13a``, the
    WMT/NIST default; ``intl``, ``zh``, ``char``, ``none``...)."""

    def __init__(self, tokenize: str = "13a"):
        from sacrebleu.metrics import BLEU, CHRF

        self.tokenize = tokenize
        self._bleu = BLEU(lowercase=True, tokenize=tokenize)  # raises for an unknown tokenizer name
        self._bleu_cased = BLEU(lowercase=False, tokenize=tokenize)
        self._chrf = CHRF()
        self.reset()

    def reset(self) -> None:
        self.hypotheses: list[str] = []
        self.references: list[list[str]] = []

    def __call__(self, hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> None:
        hypotheses, references = list(hypotheses), [list(r) for r in references]
        if len(hypotheses) != len(references):
            raise ValueError(f"{len(hypotheses)} hypotheses but references for {len(references)} sentences")
        for i, (hypothesis, refs) in enumerate(zip(hypotheses, references)):
            if not isinstance(hypothesis, str):
                raise ValueError(f"hypothesis {i} is a {type(hypothesis).__name__}, not a string")
            if not refs:
                raise ValueError(f"sentence {i} has no reference")
            if not all(isinstance(r, str) for r in refs):
                raise ValueError(f"sentence {i}: every reference must be a string")
        self.hypotheses.extend(hypotheses)
        self.references.extend(references)

    def get_metric(self, reset: bool = False) -> dict[str, float]:
        if self.hypotheses:
            streams = reference_streams(self.references)
            result = {"bleu": self._bleu.corpus_score(self.hypotheses, streams).score,
                      "bleu_cased": self._bleu_cased.corpus_score(self.hypotheses, streams).score,
                      "chrf": self._chrf.corpus_score(self.hypotheses, streams).score}
        else:
            result = {"bleu": 0.0, "bleu_cased": 0.0, "chrf": 0.0}
        if reset:
            self.reset()
        return result

    def signature(self) -> str:
        """sacrebleu's signature of the case-insensitive BLEU (its ``nrefs`` is that of the last
        scored corpus)."""
        return str(self._bleu.get_signature())
