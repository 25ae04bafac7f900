"""The character BERT baseline of Lattice-BERT (``char_bert``): the same factorised embedding
(E -> d), the same [CLS] handling and the same post-LayerNorm GELU layers as ``lattice_bert``
(``encoders/factorised.py``), over the characters only, with learned absolute positions added to
the inputs (BERT, Devlin et al. 2019): ``H^0 = W_p LayerNorm(x_i + P_i)``, attention
``softmax(q.k / sqrt(d_k))`` masked at padding. Input ``[B, n, E]`` (the ``lattice_tokens``
embedder with ``words: false``), output ``[B, n, d]``.

How it matches the paper's "BERT-our" (Lattice-BERT paper §3.2 and Appendix C): same corpus, sizes,
optimiser and number of characters processed; characters as inputs; masking of whole segments of
the lattice (``pretrainer`` with ``use_words: false``), the counterpart of the whole word masking
BERT-our used. BERT-our also kept Lattice-BERT's absolute-position attention and distance terms;
that variant is ``lattice_bert`` with ``use_relation: false`` over a lattice without words
(``pretrainer.use_words: false`` feeds it characters only). This file is the plain BERT.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.factorised import FactorisedBertEncoder, TokenPositions, key_padding_bias
from multigrain.platform.kinds import Encoder


@Encoder.register("char_bert")
class CharBertEncoder(FactorisedBertEncoder):
    weight_sources = ("pretrained",)

    def __init__(self, input_dim: int, hidden_size: int = 256, num_layers: int = 4, num_heads: int = 4,
                 intermediate_size: Optional[int] = None, max_positions: int = 512, dropout: float = 0.1,
                 attention_dropout: float = 0.1, cls: Literal["first", "prepend"] = "prepend",
                 pretrained: Optional[str] = None):
        super().__init__(input_dim, hidden_size, num_layers, num_heads, intermediate_size, dropout,
                         attention_dropout, cls, scale=None)
        self.max_positions = max_positions
        self.positions = nn.Embedding(max_positions, input_dim)
        self.init_weights(pretrained)

    @property
    def max_characters(self) -> int:
        """The most characters one row may hold (text positions start at 0, beside [CLS])."""
        return self.max_positions

    def encode_tokens(self, inputs: torch.Tensor, tokens: TokenPositions) -> tuple[torch.Tensor, torch.Tensor]:
        """``inputs [B, n, E]``, ``tokens.mask [B, n]`` (the character positions are 0..n-1) ->
        (character states ``[B, n, d]``, [CLS] state ``[B, d]``)."""
        index = TokenPositions.characters(tokens.mask).starts
        x, mask, positions, _ = self.with_cls(inputs, tokens.mask, index, index)
        if positions.shape[1] and int(positions.max()) >= self.max_positions:
            raise ValueError(f"input of {positions.shape[1]} positions; char_bert has max_positions {self.max_positions}")
        states = self.run_layers(x + self.positions(positions), key_padding_bias(mask, self.num_heads, x.dtype))
        return self.without_cls(states), states[:, 0]

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: dict) -> torch.Tensor:
        n = mask.shape[1]
        return self.encode_tokens(inputs[:, :n], TokenPositions.characters(mask))[0]
