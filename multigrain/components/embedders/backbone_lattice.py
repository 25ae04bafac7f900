"""Lattice tokens over a pretrained backbone: PLTE's BERT setting (PLTE paper §5, "PLTE[BERT]").

Characters take the backbone's contextual states, words their own embeddings, both projected
to ``output_dim``::

    x_i = W_c h_i + b_c          h = backbone(c_1 .. c_n)  [B, n, d_backbone]   (e.g. hf_transformer)
    x_w = W_w word_emb(w) + b_w                            [B, T, output_dim]

placed in the ``LatticeBatch`` layout (characters at 0..n_b-1 of each row, words after them,
zeros at padding), as the ``lattice`` embedder does with character + bigram embeddings.
``uses_lattice = True`` (the tagger passes ``lattice.mask`` as the token mask). Character ids,
word pieces and ``max_characters`` are the backbone's (``index``, ``piece_batch``).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.components.embedders.char_bigram import make_embedding
from multigrain.platform.kinds import TokenEmbedder
from multigrain.platform.vocab import Vocabulary


@TokenEmbedder.register("backbone_lattice")
class BackboneLatticeEmbedder(TokenEmbedder):
    weight_sources = ("word_pretrained_file",)

    uses_lattice = True

    def __init__(self, vocab: Vocabulary, backbone: TokenEmbedder, output_dim: int = 128, word_dim: int = 50,
                 word_pretrained_file: Optional[str] = None, dropout: float = 0.5):
        super().__init__()
        self.backbone = backbone
        self.words = make_embedding(vocab, "words", word_dim, word_pretrained_file)
        self.char_projection = nn.Linear(backbone.get_output_dim(), output_dim)
        self.word_projection = nn.Linear(word_dim, output_dim)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = output_dim
        self.max_length = getattr(backbone, "max_length", None)

    def get_output_dim(self) -> int:
        return self.output_dim

    @property
    def max_characters(self) -> Optional[int]:
        return getattr(self.backbone, "max_characters", None)

    def index(self, tokens: list[str]) -> list[int]:
        return self.backbone.index(tokens)

    def piece_batch(self, rows: list[list[str]]) -> dict:
        hook = getattr(self.backbone, "piece_batch", None)
        return hook(rows) if hook is not None else {}

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, lattice=None, **batch) -> torch.Tensor:
        c = self.char_projection(self.dropout(self.backbone(chars=chars, mask=mask, **batch)))  # [B, n, d]
        if lattice is None:
            return c
        T = lattice.mask.shape[1]
        word_ids = lattice.token_ids.masked_fill(~lattice.word_mask, 0)
        w = self.word_projection(self.dropout(self.words(word_ids)))  # [B, T, d]
        c = nn.functional.pad(c[:, :T], (0, 0, 0, T - min(T, c.shape[1])))
        return torch.where(lattice.is_char.unsqueeze(-1), c, w) * lattice.mask.unsqueeze(-1)
