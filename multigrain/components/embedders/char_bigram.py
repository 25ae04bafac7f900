"""Character (+ bigram) embeddings for character sequences."""
from __future__ import annotations

from typing import Annotated, Optional

import torch
from torch import nn

from multigrain.components.vectors import load_vec_into
from multigrain.platform.hints import Range
from multigrain.platform.kinds import TokenEmbedder
from multigrain.platform.vocab import Vocabulary


def make_embedding(vocab: Vocabulary, namespace: str, dim: int, pretrained_file: Optional[str]) -> nn.Embedding:
    emb = nn.Embedding(max(2, vocab.size(namespace)), dim, padding_idx=0)
    nn.init.uniform_(emb.weight, -(3.0 / dim) ** 0.5, (3.0 / dim) ** 0.5)
    with torch.no_grad():
        emb.weight[0].zero_()
        if pretrained_file:
            load_vec_into(emb.weight, vocab.tokens(namespace), pretrained_file)
    return emb


@TokenEmbedder.register("char_bigram")
class CharBigramEmbedder(TokenEmbedder):
    """``[char_emb(c_i); bigram_emb(c_i c_{i+1})]`` -> [B, n, char_dim + bigram_dim]."""
    weight_sources = ("char_pretrained_file", "bigram_pretrained_file")

    def __init__(self, vocab: Vocabulary, char_dim: int = 50, bigram_dim: Annotated[int, Range(0)] = 50,
                 char_pretrained_file: Optional[str] = None, bigram_pretrained_file: Optional[str] = None,
                 dropout: float = 0.5, freeze: bool = False):
        super().__init__()
        self.chars = make_embedding(vocab, "chars", char_dim, char_pretrained_file)
        self.bigrams = make_embedding(vocab, "bigrams", bigram_dim, bigram_pretrained_file) if bigram_dim else None
        for emb in (self.chars, self.bigrams):
            if emb is not None:
                emb.weight.requires_grad_(not freeze)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = char_dim + bigram_dim

    def get_output_dim(self) -> int:
        return self.output_dim

    def forward(self, chars: torch.Tensor, bigrams: Optional[torch.Tensor] = None, **unused) -> torch.Tensor:
        x = self.chars(chars)
        if self.bigrams is not None:
            x = torch.cat([x, self.bigrams(bigrams)], dim=-1)
        return self.dropout(x)
