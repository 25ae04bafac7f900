"""Corpus BLEU and chrF through sacrebleu, with every reference of every sentence.

``__call__(hypotheses, references)`` adds sentences: ``references[i]`` holds every reference of
sentence ``i``. sacrebleu takes references as *streams* (stream ``j`` = the ``j``-th reference of
every sentence); the sentences are transposed into ``max_i len(references[i])`` streams, a
sentence with fewer references padded with ``None``, which sacrebleu reads as "no reference"
(its signature then says ``nrefs:var``). A sentence without any reference is a ValueError.

**Quotes.** Hypotheses and references alike are scored with typographic quotes made ASCII
(``normalize_quotes``: ``’`` and ``‘`` become ``'``, ``“`` and ``”`` become ``"``) before
sacrebleu sees them: WMT22's references write ``it’s`` where the training targets (TVsub) write
``it's``, and without this every such apostrophe costs a model matches it could not have made.
sacrebleu's signature does not record it; the README says it.

``get_metric`` gives, on sacrebleu's 0-100 scale:

- ``bleu``: case-insensitive corpus BLEU (``lowercase=True``, as NIST reports it);
- ``bleu_cased``: the same with case kept (as WMT reports it);
- ``chrf``: chrF (character 6-grams, beta 2; case kept, sacrebleu's default).

**Which BLEU ranks** (``ranking_key()``): ``bleu_cased`` when the references of the last scored
corpus hold an upper-case letter (WMT, Tatoeba: cased text, reported cased), ``bleu`` when they
are all lower-case (TVsub's test references are lower-cased: a cased score would only punish every
capital a model writes). ``signature()`` is sacrebleu's signature of that BLEU, e.g.
``nrefs:3|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0`` (TVsub) or
``nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`` (WMT22).

**Brevity penalty.** sacrebleu (and multi-bleu.perl) take, per sentence, the reference length
*closest* to the hypothesis' length; NIST's mteval-v13a takes the *shortest* reference. With one
reference they agree; with several, the shortest gives a smaller penalty (a higher BLEU) to short
hypotheses. ``nist_bp=True`` uses the shortest (the signature then ends in ``|bp:shortest``
before the version); the default, and every leaderboard figure, is sacrebleu's closest.
"""
from __future__ import annotations

from typing import Optional, Sequence

from multigrain.platform.kinds import Metric

#: typographic quotes -> ASCII (``normalize_quotes``)
QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


def normalize_quotes(text: str) -> str:
    """``’`` ``‘`` -> ``'`` and ``“`` ``”`` -> ``"`` (nothing else changes)."""
    return text.translate(QUOTES)


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[Optional[str]]]:
    """Per-sentence reference lists -> sacrebleu's streams, short lists padded with None."""
    width = max((len(r) for r in references), default=0)
    return [[refs[j] if j < len(refs) else None for refs in references] for j in range(width)]


def sacrebleu_bleu(lowercase: bool, tokenize: str, nist_bp: bool = False):
    """sacrebleu's ``BLEU`` scorer; ``nist_bp``: one whose brevity penalty takes the shortest
    reference (mteval-v13a) and whose signature says ``bp:shortest``."""
    from sacrebleu.metrics import BLEU

    # BLEU raises for an unknown tokenizer name
    return (_shortest_reference_bleu() if nist_bp else BLEU)(lowercase=lowercase, tokenize=tokenize)


def _shortest_reference_bleu() -> type:
    """``ShortestReferenceBLEU``, made on first use (sacrebleu is imported lazily) and kept as a
    global of this module, so that a metric holding one pickles."""
    made = globals().get("ShortestReferenceBLEU")
    if made is not None:
        return made
    from sacrebleu.metrics import BLEU
    from sacrebleu.metrics.bleu import BLEUSignature

    class ShortestSignature(BLEUSignature):
        def __init__(self, args: dict):
            super().__init__(args)
            self._abbr["bp"] = "bp"
            self.info["bp"] = "shortest"

    class ShortestReferenceBLEU(BLEU):
        """sacrebleu's BLEU with mteval-v13a's brevity penalty: the shortest reference length."""

        _SIGNATURE_TYPE = ShortestSignature

        def _get_closest_ref_len(self, hyp_len: int, ref_lens: list[int]) -> int:
            return min(ref_lens)

    for cls in (ShortestSignature, ShortestReferenceBLEU):
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls
    return ShortestReferenceBLEU


@Metric.register("bleu")
class Bleu(Metric):
    """Corpus BLEU (case-insensitive and cased) and chrF over the sentences added since the last
    reset (see the module docstring). ``tokenize``: sacrebleu's tokenizer name (``13a``, the
    WMT/NIST default; ``intl``, ``zh``, ``char``, ``none``...); ``nist_bp``: the brevity penalty
    of mteval-v13a (shortest reference) instead of sacrebleu's (closest reference)."""

    def __init__(self, tokenize: str = "13a", nist_bp: bool = False):
        from sacrebleu.metrics import CHRF

        self.tokenize, self.nist_bp = tokenize, nist_bp
        self._bleu = sacrebleu_bleu(True, tokenize, nist_bp)
        self._bleu_cased = sacrebleu_bleu(False, tokenize, nist_bp)
        self._chrf = CHRF()
        #: what the last ``get_metric`` scored: sentences, reference streams, cased references
        self.last: dict = {}
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
        self.hypotheses.extend(normalize_quotes(h) for h in hypotheses)
        self.references.extend([normalize_quotes(r) for r in refs] for refs in references)

    def get_metric(self, reset: bool = False) -> dict[str, float]:
        if self.hypotheses:
            streams = reference_streams(self.references)
            result = {"bleu": self._bleu.corpus_score(self.hypotheses, streams).score,
                      "bleu_cased": self._bleu_cased.corpus_score(self.hypotheses, streams).score,
                      "chrf": self._chrf.corpus_score(self.hypotheses, streams).score}
            self.last = {"sentences": len(self.hypotheses), "reference_streams": len(streams),
                         "cased_references": any(r != r.lower() for refs in self.references for r in refs)}
        else:
            result = {"bleu": 0.0, "bleu_cased": 0.0, "chrf": 0.0}
            self.last = {}
        if reset:
            self.reset()
        return result

    def ranking_key(self) -> str:
        """``bleu_cased`` when the last scored corpus has cased references, else ``bleu``."""
        return "bleu_cased" if self.last.get("cased_references") else "bleu"

    def signature(self, key: Optional[str] = None) -> str:
        """sacrebleu's signature of ``key`` (``bleu`` or ``bleu_cased``; default: ``ranking_key()``),
        its ``nrefs`` that of the last scored corpus."""
        key = key or self.ranking_key()
        if key not in ("bleu", "bleu_cased"):
            raise ValueError(f"no signature of {key!r}: bleu or bleu_cased")
        return str((self._bleu if key == "bleu" else self._bleu_cased).get_signature())
