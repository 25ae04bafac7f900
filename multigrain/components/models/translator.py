"""Chinese -> English translation: source embedder -> any registered encoder -> ``nmt_decoder``.

Fields (the translation readers): ``source`` (Chinese text), ``chars`` (its tokens),
``references: list[str]`` (English; the first is the training target) and optionally
``lattice`` (a reader's ``lattice_builder``: BiG reads its words). Source side as the tagger's:
``chars``, ``mask [B, n]``, ``bigrams`` when the embedder reads them, the ``LatticeBatch``.

Target side: a subword model (``components/subwords.py``: HF ``tokenizers``, ``bpe`` or
``unigram``, at most ``target_vocab_size`` pieces) trained on the first reference of every
training example, fitted before the model is built and kept in the run directory
(``resources/target_subwords.json``, ``platform/resources.py``), so ``--resume``, ``predict``,
``evaluate`` and ``serve`` use the same one. The batch has ``target_input`` = ``BOS y`` and
``target_output`` = ``y EOS`` ``[B, T]``.

- training: teacher-forced label-smoothed loss on the first reference;
- evaluation (``model.eval()`` with references): the loss, a beam search (``beam_size``,
  GNMT ``length_penalty``, at most ``max_length_ratio * n + max_length_offset`` tokens for a
  source of n characters) and corpus BLEU/chrF over *all* references (``metrics/bleu.py``;
  ``bleu: {nist_bp: true, tokenize: ...}`` configures it, ``bleu_tokenize`` is the older key
  of the tokenizer);
- prediction (no references): the beam search alone; ``{"source", "translation"}``, plus
  ``"truncated": true`` when the source was cut (below).

A source of more than ``max_source_length`` characters is a DataError naming its file and line,
or is cut to that length with ``truncate: true`` (its lattice's words inside the cut kept). A cut
is never silent: the prediction says ``"truncated": true`` (``predict`` warns once per file,
``serve`` logs each request that had one) and ``evaluation_notes()`` counts the sources cut in the
last evaluation (``multigrain evaluate`` prints it).

After an evaluation, ``ranking_metric()`` names the BLEU that ranks it (cased for cased references,
``metrics/bleu.py``), ``tracking_tags()`` give its sacrebleu signature and ``evaluation_notes()``
the reference streams, signature and cut sources.
"""
from __future__ import annotations

import json
from array import array
from collections import Counter
from typing import Any, Literal, Optional

import torch

from multigrain.components.heads.nmt_decoder import NmtDecoder
from multigrain.components.metrics.bleu import Bleu
from multigrain.components.models.base import CharLatticeModel, count_lattice_words, source_of
from multigrain.components.models.packing import Part, pack
from multigrain.components.subwords import Subwords, train_subwords
from multigrain.components.text import bigrams_of, split_chars
from multigrain.platform.batching import joined_ids, length_mask, pad_ids
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Encoder, Model, TokenEmbedder
from multigrain.platform.resources import Resources
from multigrain.platform.vocab import Vocabulary

SUBWORDS_FILE = "target_subwords.json"


@Model.register("translator")
class Translator(CharLatticeModel):
    """embedder -> encoder -> ``nmt_decoder`` (see the module docstring)."""

    task = "mt"
    leaderboard_metric = "bleu"

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, encoder: Optional[Lazy[Encoder]] = None,
                 decoder: Optional[Lazy[NmtDecoder]] = None, target_vocab_size: int = 8000,
                 subword_model: Literal["bpe", "unigram"] = "bpe", beam_size: int = 4, length_penalty: float = 0.6,
                 max_length_ratio: float = 1.5, max_length_offset: int = 10, max_source_length: int = 256,
                 truncate: bool = False, bleu_tokenize: str = "13a", bleu: Optional[Bleu] = None,
                 resources: Optional[Resources] = None):
        super().__init__(vocab, embedder, encoder)
        if resources is None:
            raise ConfigurationError("the translator needs the run's resources (its target subword model); "
                                     "build it through a Run")
        for name, value in (("target_vocab_size", target_vocab_size), ("beam_size", beam_size),
                            ("max_source_length", max_source_length)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if max_length_ratio < 0 or max_length_offset < 0 or max_length_ratio * 1 + max_length_offset < 1:
            raise ValueError("max_length_ratio and max_length_offset must be >= 0 and allow at least one token")
        self.beam_size, self.length_penalty = beam_size, length_penalty
        self.max_length_ratio, self.max_length_offset = max_length_ratio, max_length_offset
        self.max_source_length, self.truncate = max_source_length, truncate

        def fit(instances, path):
            train_subwords((x["references"][0] for x in instances if x.get("references")), path,
                           target_vocab_size, subword_model)

        self.subwords = Subwords(resources.get(SUBWORDS_FILE, fit))
        s = self.subwords
        self.decoder = (decoder.construct(input_dim=self.output_dim, vocab_size=s.vocab_size, pad=s.pad, bos=s.bos,
                                          eos=s.eos) if decoder else
                        NmtDecoder(self.output_dim, s.vocab_size, s.pad, s.bos, s.eos))
        if bleu is not None and bleu_tokenize != "13a" and bleu.tokenize != bleu_tokenize:
            raise ConfigurationError(f"model.bleu_tokenize {bleu_tokenize!r} and model.bleu.tokenize "
                                     f"{bleu.tokenize!r} differ: give the tokenizer once, as model.bleu.tokenize")
        self.metric = bleu if bleu is not None else Bleu(bleu_tokenize)
        self._cut = self._cut_last = 0  # sources cut in the evaluation under way / the last one
        self._memo_owner = object()  # the examples' ids under this model (pair_ids)

    # data ----------------------------------------------------------------------------------------
    @classmethod
    def count_vocab_items(cls, instance: Instance, counters: dict[str, Counter]) -> None:
        chars = instance["chars"]
        counters.setdefault("chars", Counter()).update(chars)
        counters.setdefault("bigrams", Counter()).update(bigrams_of(chars))
        lattice = instance.get("lattice")
        if lattice is not None:
            count_lattice_words(lattice, counters)

    def instance_length(self, instance: Instance) -> int:
        return self.source_length(instance)  # a source too long (truncate off): refused before the run's files

    def instance_lengths(self, instance: Instance) -> tuple[int, int]:
        """``(source, target)`` tokens of ``instance`` as :meth:`tensorize` pads them: the source's
        characters (cut to ``max_source_length``) and the subword pieces of its first reference
        plus one (``target_input`` = BOS + pieces, ``target_output`` = pieces + EOS); 0 without a
        reference. For token-budget batches (``data_loader.max_tokens``: source + target tokens,
        padding counted): both sides are padded separately, so a batch of n pairs costs
        ``n * (longest source + longest target)``. The pair's ids are derived here once, before
        the first epoch, and kept with it (:meth:`pair_ids`)."""
        source = self.source_length(instance)
        if not instance.get("references"):
            return source, 0
        return source, len(self.pair_ids([instance], [source])[0]) - source + 1

    def source_length(self, instance: Instance) -> int:
        n = len(instance["chars"])
        if n > self.max_source_length and not self.truncate:
            raise DataError(*source_of(instance), f"a source of {n} characters, more than max_source_length "
                                                  f"{self.max_source_length} (truncate is off)")
        return min(n, self.max_source_length)

    def pair_ids(self, instances: list[Instance], lengths: list[int]) -> list[array]:
        """Each example's source character ids (its first ``lengths``: ``source_length``), then the subword
        pieces of its first reference (none without one), as ``array('i')``: derived once per
        example and model and kept with it (``Instance.memo``); the pieces of the examples not seen
        before are encoded in one call."""
        owner = self._memo_owner
        ids = [x.memo(owner) for x in instances]
        todo = [i for i, v in enumerate(ids) if v is None]
        if todo:
            first = [instances[i].get("references") for i in todo]
            encoded = iter(self.subwords.encode([r[0] for r in first if r]))
            for i, references in zip(todo, first):
                x = instances[i]
                v = array("i", self.char_ids(x["chars"][:lengths[i]]))
                if references:
                    v.extend(next(encoded))
                x.remember(owner, v)
                ids[i] = v
        return ids

    def target_tensors(self, pieces: list[array]) -> dict[str, torch.Tensor]:
        """``target_input`` = BOS y, ``target_output`` = y EOS, ``[B, longest + 1]`` padded, and
        ``target_positions``, from each example's pieces y (one copy of their ids)."""
        s = self.subwords
        lengths = torch.tensor([len(p) for p in pieces], dtype=torch.long).unsqueeze(1)
        steps = torch.arange(int(lengths.max()) + 1)
        flat = joined_ids(pieces)
        target_output = torch.full((len(pieces), steps.numel()), s.pad, dtype=torch.long)
        target_output[steps < lengths] = flat
        target_output.scatter_(1, lengths, s.eos)
        target_input = torch.full_like(target_output, s.pad)
        target_input[:, 0] = s.bos
        target_input[(steps >= 1) & (steps <= lengths)] = flat
        return {"target_input": target_input, "target_output": target_output,
                "target_positions": (target_output != s.pad).flatten().nonzero().squeeze(1)}

    def tensorize(self, instances: list[Instance]) -> dict[str, Any]:
        lengths = [self.source_length(x) for x in instances]  # an over-long source: the DataError, every time
        ids = self.pair_ids(instances, lengths)
        batch: dict[str, Any] = {"chars": pad_ids([v[:n] for v, n in zip(ids, lengths)]),
                                 "mask": length_mask(lengths),
                                 "truncated": torch.tensor([n < len(x["chars"]) for n, x in zip(lengths, instances)],
                                                           dtype=torch.bool)}
        if getattr(self.embedder, "bigrams", None) is not None:
            batch["bigrams"] = pad_ids([self.vocab.indices("bigrams", bigrams_of(list(x["chars"][:n])))
                                        for x, n in zip(instances, lengths)])
        lattices = []
        for x, n in zip(instances, lengths):
            lattice = x.get("lattice")
            if lattice is not None and n < len(x["chars"]):
                lattice = pack([Part(x["chars"], lattice, 0, n)]).lattice
            lattices.append(lattice)
        lattice = self.collate_lattices(lattices)
        if lattice is not None:
            batch["lattice"] = lattice
        if all(x.get("references") for x in instances):
            batch.update(self.target_tensors([v[n:] for v, n in zip(ids, lengths)]))
            batch["references"] = [list(x["references"]) for x in instances]
        return batch

    def text_to_instance(self, data: dict) -> Instance:
        """``{"text": "..."}`` (Chinese), optionally with ``"references": ["...", ...]``."""
        if "text" not in data:
            raise ValueError('expected "text"')
        text = data["text"]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f'"text" must be a non-empty string, got {json.dumps(text, ensure_ascii=False)[:40]}')
        inst = Instance({"source": text, "chars": split_chars(text)})
        if "references" in data:
            refs = data["references"]
            if not isinstance(refs, list) or not refs or not all(isinstance(r, str) and r.strip() for r in refs):
                raise ValueError('"references" must be a non-empty list of non-empty strings')
            inst["references"] = refs
        return inst

    # computation ---------------------------------------------------------------------------------
    def max_lengths(self, mask: torch.Tensor) -> torch.Tensor:
        """``[B]``: at most ``ratio * n + offset`` target tokens for n source characters."""
        n = mask.sum(-1).float()
        return (n * self.max_length_ratio + self.max_length_offset).floor().long().clamp(min=1)

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, target_input: Optional[torch.Tensor] = None,
                target_output: Optional[torch.Tensor] = None, references: Optional[list[list[str]]] = None,
                truncated: Optional[torch.Tensor] = None, target_positions: Optional[torch.Tensor] = None,
                **batch) -> dict[str, Any]:
        """chars, mask [B, n]; target_input/target_output [B, T]; references (strings); truncated
        [B] (bool: the source was cut); target_positions [N] (the flat indices of the non-padding
        targets: only those are projected onto the vocabulary, ``NmtDecoder.forward``); optional
        bigrams and lattice. Training: ``loss``.
        Evaluation: ``loss`` (with targets), ``tokens [B, L]`` (the best hypothesis of each
        source, no EOS) and ``truncated``."""
        states = self.embed_and_encode(chars, mask, batch)[1]
        out: dict[str, Any] = {}
        if target_input is not None:
            out = self.decoder(states, mask, target_input, target_output, target_positions)
            out.pop("logits", None)
        if self.training:
            return out
        with torch.no_grad():
            hypotheses = self.decoder.decode(states, mask, self.max_lengths(mask), self.beam_size,
                                             self.length_penalty)
        out["tokens"] = hypotheses.best
        if truncated is not None:
            out["truncated"] = truncated
        if references is not None:
            self.metric(self.detokenize(out["tokens"]), references)
            self._cut += int(truncated.sum()) if truncated is not None else 0
        return out

    def detokenize(self, tokens: torch.Tensor) -> list[str]:
        """Plain text of ``tokens [B, L]`` (padding and special tokens dropped)."""
        return self.subwords.decode(tokens.tolist())

    def get_metrics(self, reset: bool = False) -> dict[str, float]:
        if reset:
            self._cut_last, self._cut = self._cut, 0
        return self.metric.get_metric(reset)

    def ranking_metric(self) -> str:
        """The metric that ranks the last evaluation: ``bleu_cased`` for cased references (WMT),
        ``bleu`` for lower-cased ones (TVsub); see ``metrics/bleu.py``."""
        return self.metric.ranking_key()

    def tracking_tags(self) -> dict[str, str]:
        """Tags for the run's tracking: the sacrebleu signature of the BLEU that ranks the last
        evaluation (its ``nrefs``, its ``case``)."""
        return {"sacrebleu_signature": self.metric.signature()}

    def evaluation_notes(self) -> dict[str, Any]:
        """What the last evaluation scored against: reference streams, the sacrebleu signature of
        the ranking BLEU, and how many sources were cut to ``max_source_length``."""
        if not self.metric.last:
            return {}
        return {"reference_streams": self.metric.last["reference_streams"], "ranked_by": self.ranking_metric(),
                "sacrebleu_signature": self.metric.signature(), "sources_truncated": self._cut_last,
                "max_source_length": self.max_source_length}

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        translations = self.detokenize(output["tokens"].cpu())
        cut = output["truncated"].tolist() if "truncated" in output else [False] * len(instances)
        return [{"source": x.get("source", "".join(x["chars"])), "translation": t, **({"truncated": True} if c else {})}
                for x, t, c in zip(instances, translations, cut)]
