"""PLTE: the Porous Lattice Transformer Encoder (Xue et al., COLING 2020), paper §4.

Input: the ``lattice`` embedder's tokens ``[B, T, d_in]`` (characters, then words, padding)
and ``batch["lattice"]``. Each token gets ``proj(x) + P(start)`` (a word's position is its
first character, §4.1). Per layer, lattice-aware self-attention (§4.2, eqs. 3-4)::

    score_ij = (q_i.k_j + q_i.RK[rel_ij]) / sqrt(dh)      out_i = sum_j a_ij (v_j + RV[rel_ij])

with ``rel`` the 9 ids of ``lattice.structure.plte_relations`` (r1..r7, pivot, padding) and
RK, RV ``[9, dh]`` per layer, computed by gather/scatter (``nn.attention.relation_attention``).
Porous mechanism (eq. 5): token i attends to the tokens in relations r1..r6 with it and to
the pivot s, never to r7 (non-neighbouring) ones; ``pivot="mean"`` (the paper):
s = mean of the layer input over real tokens; ``pivot="attention"``: s starts as that mean
and is updated after each layer star-style, s = LayerNorm(s + MultiAtt(s, [s; H])).
Residual, LayerNorm and FFN as in a Transformer (post-norm).

Ablations (paper Fig. 4b): ``lattice=False`` drops the word tokens (characters only: "-LASA";
then the porous mask keeps i-1, i, i+1 and the pivot); ``porous=False`` attends to every real
token with no pivot ("-PM"); both False is "-LASA-PM". With ``lattice=False`` the encoder also
works on a ``char_bigram`` embedder and batches without lattices.

Output: the character states ``[B, n, hidden_size]`` (zeros at padding).
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.sized import SizedEncoder
from multigrain.components.lattice.structure import NUM_PLTE_RELATIONS, plte_relations, porous_mask
from multigrain.components.nn.add_norm import AddNorm
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.char_input import CharInput
from multigrain.components.nn.old_names import accept_old_names
from multigrain.components.nn.sequence import masked_mean
from multigrain.components.nn.transformer_layer import PostNormTransformerLayer
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder


def plte_structure(starts: torch.Tensor, ends: torch.Tensor, mask: torch.Tensor, porous: bool):
    """Relation ids and attention mask of the queries ``[B, T]`` over the keys:
    ``(rel [B, T, T'], allowed [B, T, T'])`` with T' = T + 1 (the pivot last) when porous,
    else T' = T and every real key allowed."""
    if porous:
        rel = plte_relations(starts, ends, mask, with_pivot=True)
        return rel[:, :-1], porous_mask(rel, mask)[:, :-1]
    rel = plte_relations(starts, ends, mask)
    return rel, mask.unsqueeze(2) & mask.unsqueeze(1)


@Encoder.register("plte")
class PlteEncoder(SizedEncoder):
    """Lattice tokens ``[B, T, input_dim]`` -> character states ``[B, n, hidden_size]``.

    Each layer is a :class:`PostNormTransformerLayer` whose attention has the relation tables
    (called with keys ``[tokens; pivot]``, ``allowed`` and ``rel``). Archives saved before
    ``components/nn`` named the input projection and position table ``projection``,
    ``positions``; they load into ``char_input``.

    Paper settings: hidden 128, 6 heads, encoder dropout 0.3; 128 is not a multiple of 6, so the
    specs set ``head_dim`` 22 (6 x 22 = 132 inner, mapped back to 128 by the output projection).
    The number of layers and the FFN size are not given in the paper (defaults 2 and 4 x hidden).
    ``attention_dropout`` applies to the attention weights (0 by default: the paper names none).
    """

    def __init__(self, input_dim: int, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 head_dim: Optional[int] = None, ffn_dim: Optional[int] = None, dropout: float = 0.3,
                 attention_dropout: float = 0.0, lattice: bool = True, porous: bool = True,
                 pivot: Literal["mean", "attention"] = "mean",
                 positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal", max_length: int = 512):
        super().__init__()
        if pivot not in ("mean", "attention"):
            raise ConfigurationError(f"pivot must be 'mean' or 'attention', got {pivot!r}")
        self.input_dim = input_dim
        self.hidden_size = self.output_dim = hidden_size
        self.lattice, self.porous, self.pivot = lattice, porous, pivot
        self.char_input = CharInput(input_dim, hidden_size, dropout, positions, max_length)
        self.layers = nn.ModuleList(
            PostNormTransformerLayer(MultiHeadAttention(hidden_size, num_heads, head_dim, attention_dropout,
                                                        num_relations=NUM_PLTE_RELATIONS),
                                     ffn_dim or 4 * hidden_size, dropout)
            for _ in range(num_layers))
        if porous and pivot == "attention":
            # updates after layers 1 .. L-1 (the pivot after the last layer reaches no output)
            self.relay = nn.ModuleList(MultiHeadAttention(hidden_size, num_heads, head_dim, attention_dropout)
                                       for _ in range(num_layers - 1))
            self.relay_norm = nn.ModuleList(AddNorm(hidden_size, dropout) for _ in range(num_layers - 1))
        accept_old_names(self, {"projection.": "char_input.projection.", "positions.": "char_input.positions."})

    def tokens(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict]):
        """The tokens this encoder attends over: ``(x [B, T, d_in], starts, ends, mask [B, T])``
        (characters only when ``lattice=False``)."""
        lattice = (batch or {}).get("lattice")
        if lattice is None:
            if self.lattice:
                raise ConfigurationError("plte with lattice=true needs lattices: give the dataset reader a "
                                         "lattice_builder and the model the 'lattice' embedder")
            positions = torch.arange(inputs.shape[1], device=inputs.device).expand(inputs.shape[:2])
            return inputs, positions, positions, mask
        if not self.lattice:
            n = lattice.max_chars
            positions = torch.arange(n, device=inputs.device).expand(inputs.shape[0], n)
            return inputs[:, :n], positions, positions, lattice.char_mask
        if inputs.shape[1] != lattice.mask.shape[1]:
            raise ConfigurationError(f"plte with lattice=true needs an embedding for every lattice token "
                                     f"({lattice.mask.shape[1]} positions, got {inputs.shape[1]}): use the "
                                     f"'lattice' embedder")
        return inputs, lattice.starts, lattice.ends, lattice.mask

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        x, starts, ends, token_mask = self.tokens(inputs, mask, batch)
        rel, allowed = plte_structure(starts, ends, token_mask, self.porous)
        x = self.char_input.embed(x, starts)
        pivot = masked_mean(x, token_mask) if self.porous else None
        for i, layer in enumerate(self.layers):
            if self.porous and self.pivot == "mean" and i > 0:
                pivot = masked_mean(x, token_mask)
            keys = x if pivot is None else torch.cat([x, pivot], dim=1)
            x = layer(x, keys, allowed=allowed, rel=rel) * token_mask.unsqueeze(-1)
            if self.porous and self.pivot == "attention" and i < len(self.relay):
                keys = torch.cat([pivot, x], dim=1)
                key_mask = torch.cat([token_mask.new_ones(token_mask.shape[0], 1), token_mask], dim=1)
                pivot = self.relay_norm[i](pivot, self.relay[i](pivot, keys, key_mask=key_mask))
        lattice = (batch or {}).get("lattice")
        char_mask = lattice.char_mask if lattice is not None else token_mask
        return x[:, : char_mask.shape[1]] * char_mask.unsqueeze(-1)
