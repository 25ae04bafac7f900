"""``union``: the words of several builders in one lattice, with a bitmask of who proposed each."""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from multigrain.components.lattice.builder import LatticeBuilder, assemble, char_offsets
from multigrain.components.lattice.types import Lattice
from multigrain.platform.errors import ConfigurationError


@LatticeBuilder.register("union")
class UnionBuilder(LatticeBuilder):
    """Words proposed by any of ``builders``, de-duplicated by span; ``sources`` bit k is set
    when builder k proposed the word (at most 62 builders). ``seg_ids`` = the rows of every
    builder that has them, concatenated in builder order (None if none has)."""

    def __init__(self, builders: list[LatticeBuilder]):
        if not builders:
            raise ConfigurationError("union: give at least one builder")
        if len(builders) > 62:
            raise ConfigurationError("union: at most 62 builders (sources is an int64 bitmask)")
        self.builders = list(builders)

    def spec_key(self) -> str:
        return self._spec(builders=[b.spec_key() for b in self.builders])

    def build_many(self, sentences: Sequence[Sequence[str]]) -> list[Lattice]:
        _, _, _, _, first_char = char_offsets(sentences)
        per_builder = [b.build_many(sentences) for b in self.builders]
        sent, spans, text, bits = [], [], [], []
        for k, lattices in enumerate(per_builder):
            m = np.fromiter((lat.n_words for lat in lattices), dtype=np.int64, count=len(lattices))
            sent.append(np.repeat(np.arange(len(lattices)), m))
            spans.append(np.concatenate([lat.spans[lat.n_chars :] for lat in lattices]).astype(np.int64))
            text.extend(itertools.chain.from_iterable(lat.token_text[lat.n_chars :] for lat in lattices))
            bits.append(np.full(int(m.sum()), 1 << k, dtype=np.int64))
        sent, spans, bits = np.concatenate(sent), np.concatenate(spans), np.concatenate(bits)
        key = (first_char[sent] + spans[:, 0]) * (int(first_char[-1]) + 1) + (spans[:, 1] - spans[:, 0])
        unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        merged = np.zeros(len(unique), dtype=np.int64)
        np.bitwise_or.at(merged, inverse, bits)
        text = np.asarray(text, dtype=object)[first] if len(first) else []
        rows = [[lat.seg_ids for lat in lats if lat.seg_ids is not None] for lats in zip(*per_builder)]
        seg_ids = [np.concatenate(r) if r else None for r in rows]
        return assemble(
            sentences, first_char, sent[first], spans[first, 0], spans[first, 1], text, merged, seg_ids
        )
