"""Embeddings of every lattice token (characters and words) for PLTE and Lattice LSTM.

Characters: ``proj_c([char_emb(c_i); bigram_emb(c_i c_{i+1})])``; words:
``proj_w(word_emb(w))``; both of size ``output_dim``, placed in the ``LatticeBatch`` layout
(characters at positions 0..n_b-1 of each row, words after them, zeros at padding):
``[B, T, output_dim]``. Dropout is applied to the embeddings before the projections.

``uses_lattice = True``: the tagger then passes ``lattice.mask`` [B, T] as the token mask.
Word ids come from the ``words`` vocabulary namespace (the lattice words of the training set).
Pretrained vectors: ``char_pretrained_file`` / ``bigram_pretrained_file`` /
``word_pretrained_file`` in ``.vec`` text format (``components.vectors.load_vec_into``).
Without a lattice in the batch only the characters are embedded: ``[B, n, output_dim]``.
"""
from __future__ import annotations

from typing import Annotated, Optional

import torch
from torch import nn

from multigrain.components.embedders.char_bigram import make_embedding
from multigrain.platform.hints import Range
from multigrain.platform.kinds import TokenEmbedder
from multigrain.platform.vocab import Vocabulary


@TokenEmbedder.register("lattice")
class LatticeEmbedder(TokenEmbedder):
    weight_sources = ("char_pretrained_file", "bigram_pretrained_file", "word_pretrained_file")

    uses_lattice = True

    def __init__(self, vocab: Vocabulary, output_dim: int = 128, char_dim: int = 50,
                 bigram_dim: Annotated[int, Range(0)] = 50, word_dim: int = 50,
                 char_pretrained_file: Optional[str] = None,
                 bigram_pretrained_file: Optional[str] = None, word_pretrained_file: Optional[str] = None,
                 dropout: float = 0.5, freeze: bool = False):
        super().__init__()
        self.chars = make_embedding(vocab, "chars", char_dim, char_pretrained_file)
        self.bigrams = make_embedding(vocab, "bigrams", bigram_dim, bigram_pretrained_file) if bigram_dim else None
        self.words = make_embedding(vocab, "words", word_dim, word_pretrained_file)
        for emb in (self.chars, self.bigrams, self.words):
            if emb is not None:
                emb.weight.requires_grad_(not freeze)
        self.char_projection = nn.Linear(char_dim + bigram_dim, output_dim)
        self.word_projection = nn.Linear(word_dim, output_dim)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = output_dim

    def get_output_dim(self) -> int:
        return self.output_dim

    def embed_chars(self, chars: torch.Tensor, bigrams: Optional[torch.Tensor]) -> torch.Tensor:
        """``[B, n] -> [B, n, output_dim]``."""
        x = self.chars(chars)
        if self.bigrams is not None:
            x = torch.cat([x, self.bigrams(bigrams)], dim=-1)
        return self.char_projection(self.dropout(x))

    def forward(self, chars: torch.Tensor, bigrams: Optional[torch.Tensor] = None, lattice=None,
                **unused) -> torch.Tensor:
        c = self.embed_chars(chars, bigrams)  # [B, n, d]
        if lattice is None:
            return c
        B, T = lattice.mask.shape
        word_ids = lattice.token_ids.masked_fill(~lattice.word_mask, 0)
        w = self.word_projection(self.dropout(self.words(word_ids)))  # [B, T, d]
        c = nn.functional.pad(c[:, :T], (0, 0, 0, T - min(T, c.shape[1])))
        out = torch.where(lattice.is_char.unsqueeze(-1), c, w)
        return out * lattice.mask.unsqueeze(-1)
