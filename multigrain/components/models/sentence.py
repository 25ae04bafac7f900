"""``SentenceModel``, the base of the models over packed texts (classifier, pair classifier, span
reader): the texts of an example are packed into one sequence (``models/packing.py``) and run

    embedder (a backbone: char_transformer, hf_transformer, or char embeddings)
      -> encoder (optional layer on the backbone's output: mwa, hrmf, big, ...)
      -> head (classifier, span).

Lattices: when the instances carry them (``lattice``, ``lattice_a``/``lattice_b``), the batch's
``LatticeBatch`` covers the packed sequence. With segmentations the batch also has
``seg_words [B, S, W]``: the ``seg_words`` vocabulary id of every segment (0 for special tokens
and padding), which HRMF reads its word vectors with.

Bigrams: with an embedder that reads them (``char_bigram`` with ``bigram_dim`` > 0) the batch
also has ``bigrams [B, n]``: each text character's forward bigram ``c_i c_{i+1}`` within its own
text (the last paired with an end marker, as the tagger's), 0 (padding) at special tokens.

Over-long inputs: ``max_length`` counts every packed position. With ``truncate`` (default) a
text is cut at the end (pairs: longest first, the first text keeping the odd position); with
``truncate: false`` an over-long example is a DataError naming its file and line.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Optional

import torch

from multigrain.components.models.base import CharLatticeModel, count_lattice_words, source_of
from multigrain.components.models.packing import CLS, SEP, Packed, fit_lengths, texts_of_segments
from multigrain.components.text import bigrams_of
from multigrain.platform.batching import length_mask, pad_ids
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Encoder, TokenEmbedder
from multigrain.platform.vocab import Vocabulary


class SentenceModel(CharLatticeModel):
    """embedder -> optional encoder -> head over packed sequences (see the module docstring)."""

    #: char-list field -> its lattice field, in packing order
    text_fields: dict[str, str] = {"chars": "lattice"}

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, encoder: Optional[Lazy[Encoder]] = None,
                 max_length: int = 512, truncate: bool = True):
        super().__init__(vocab, embedder, encoder)
        self.max_length = max_length
        self.truncate = truncate
        backbone_limit = getattr(embedder, "max_length", None)
        if backbone_limit is not None and max_length > backbone_limit:
            raise ConfigurationError(f"model.max_length {max_length} exceeds the embedder's max_length "
                                     f"{backbone_limit}; lower it or enlarge the backbone")

    # vocabulary ------------------------------------------------------------------------------
    @classmethod
    def count_vocab_items(cls, instance: Instance, counters: dict[str, Counter]) -> None:
        chars = counters.setdefault("chars", Counter())
        chars.update([CLS, SEP])
        for field, lattice_field in cls.text_fields.items():
            chars.update(instance[field])
            counters.setdefault("bigrams", Counter()).update(bigrams_of(instance[field]))
            lattice = instance.get(lattice_field)
            if lattice is None:
                continue
            count_lattice_words(lattice, counters)
            if lattice.seg_ids is not None:
                texts = texts_of_segments(lattice.chars, [False] * lattice.n_chars, lattice.seg_ids)
                counters.setdefault("seg_words", Counter()).update(t for row in texts for t in row)
        if "label" in instance:
            counters.setdefault("labels", Counter()).update([instance["label"]])

    # tensors ---------------------------------------------------------------------------------
    def lengths_within(self, instance: Instance, lengths: list[int], fixed: int) -> list[int]:
        """The text lengths after truncation to ``max_length`` (``fixed`` special positions)."""
        budget = self.max_length - fixed
        if sum(lengths) <= budget:
            return lengths
        if not self.truncate:
            raise DataError(*source_of(instance), f"{sum(lengths) + fixed} positions with [CLS]/[SEP], more than "
                                                  f"max_length {self.max_length} (truncate is off)")
        return fit_lengths(lengths, budget)

    def packed_tensors(self, packed: list[Packed]) -> dict[str, Any]:
        batch: dict[str, Any] = {
            "chars": pad_ids([self.char_ids(p.tokens) for p in packed]),
            "segments": pad_ids([p.segments for p in packed]),
            "mask": length_mask([len(p.tokens) for p in packed]),
        }
        if getattr(self.embedder, "bigrams", None) is not None:
            v = self.vocab
            batch["bigrams"] = pad_ids([[0 if b is None else v.index("bigrams", b) for b in p.bigrams]
                                        for p in packed])
        lattice = self.collate_lattices([p.lattice for p in packed])
        if lattice is not None:
            batch["lattice"] = lattice
            if lattice.seg_ids is not None:
                batch["seg_words"] = self._segment_word_ids(packed)
        return batch

    def _segment_word_ids(self, packed: list[Packed]) -> torch.Tensor:
        """``[B, S, W]``: seg_words id of each segment; 0 for special tokens and padding."""
        v = self.vocab
        known = v.size("seg_words") > 0
        rows = [[[0 if t is None else (v.index("seg_words", t) if known else 1) for t in row]
                 for row in texts_of_segments(p.tokens, p.special, p.lattice.seg_ids)] for p in packed]
        S = len(rows[0])
        W = max(len(r) for inst in rows for r in inst)
        out = torch.zeros(len(rows), S, W, dtype=torch.long)
        for b, inst in enumerate(rows):
            for s, r in enumerate(inst):
                out[b, s, : len(r)] = torch.as_tensor(r, dtype=torch.long)
        return out

    # computation -----------------------------------------------------------------------------
    def encode(self, chars: torch.Tensor, mask: torch.Tensor, batch: dict) -> torch.Tensor:
        """Backbone (+ encoder) states of the packed positions: [B, n, d]."""
        return self.embed_and_encode(chars, mask, batch)[1]
