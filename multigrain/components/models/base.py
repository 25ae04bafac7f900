"""``CharLatticeModel``, the base of every model over characters and, when the instances carry
them, their lattices: embedder -> optional encoder, with the lattice token ids and masks
computed here once for the tagger and the sentence models alike."""
from __future__ import annotations

from collections import Counter
from typing import Callable, Optional, Sequence

import torch

from multigrain.components.lattice.types import Lattice, LatticeBatch
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.kinds import Encoder, Model, TokenEmbedder
from multigrain.platform.vocab import Vocabulary


def source_of(instance: Instance) -> tuple[str, Optional[int]]:
    """``(path, line)`` of an instance for a DataError, ``("<input>", None)`` when it has none."""
    return instance.source if instance.source else ("<input>", None)


def count_lattice_words(lattice: Lattice, counters: dict[str, Counter]) -> None:
    """The lattice's words into the ``words`` namespace."""
    counters.setdefault("words", Counter()).update(lattice.token_text[lattice.n_chars:])


class CharLatticeModel(Model):
    """``embedder`` -> ``encoder`` (optional) over the characters and, with a lattice, its words.

    Character ids come from the embedder's own ``index(tokens)`` when it has one (a pretrained
    vocabulary), else from the ``chars`` namespace; lattice words from the ``words`` namespace
    (id 1 for every word when the vocabulary has none).
    """

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, encoder: Optional[Lazy[Encoder]] = None):
        super().__init__()
        self.vocab = vocab
        self.embedder = embedder
        self.encoder = encoder.construct(input_dim=embedder.get_output_dim()) if encoder else None
        self.output_dim = self.encoder.get_output_dim() if self.encoder else embedder.get_output_dim()

    # ids ---------------------------------------------------------------------------------------
    def char_ids(self, tokens: Sequence[str]) -> list[int]:
        index = getattr(self.embedder, "index", None)
        return index(list(tokens)) if index is not None else self.vocab.indices("chars", list(tokens))

    def lattice_token_id(self) -> Callable[[str, bool], int]:
        """``(token text, is_char) -> id`` for ``LatticeBatch.collate``: ``char_ids`` and the words'
        ids, with the lookups resolved once per batch rather than once per token (it is called for
        every lattice token while a batch is built); an embedder's own ``index`` (a pretrained
        vocabulary) is asked once per distinct character of the batch."""
        v = self.vocab
        index = getattr(self.embedder, "index", None)
        known: dict[str, int] = {}

        def pretrained_char_id(token: str) -> int:
            i = known.get(token)
            if i is None:
                i = known[token] = index([token])[0]
            return i
        char_id = v.index_of("chars") if index is None else pretrained_char_id
        word_id = v.index_of("words") if v.size("words") > 0 else (lambda token: 1)

        def token_to_id(token: str, is_char: bool) -> int:
            return char_id(token) if is_char else word_id(token)
        return token_to_id

    def collate_lattices(self, lattices: Sequence[Optional[Lattice]]) -> Optional[LatticeBatch]:
        """The batch's LatticeBatch; None when no example has a lattice."""
        present = [lat is not None for lat in lattices]
        if not any(present):
            return None
        if not all(present):
            raise ValueError("some examples of the batch have lattices and some do not")
        return LatticeBatch.collate(list(lattices), self.lattice_token_id())

    # computation -------------------------------------------------------------------------------
    def embed_and_encode(self, chars: torch.Tensor, mask: torch.Tensor,
                         batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """``(embedded [B, T, d_emb], states [B, n, d])``: the embedder's output over every token
        (T > n when the embedder reads the lattice's words too) and the encoder's states of the
        n characters (the embedded characters when there is no encoder)."""
        batch = dict(batch, chars=chars, mask=mask)
        embedded = self.embedder(**batch)
        if self.encoder is None:
            return embedded, embedded
        token_mask = batch["lattice"].mask if getattr(self.embedder, "uses_lattice", False) else mask
        return embedded, self.encoder(embedded, token_mask, batch)[:, : chars.shape[1]]
