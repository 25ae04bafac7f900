"""What Lattice-BERT and the character BERT baseline share (``lattice_bert.py``,
``char_bert.py``): ALBERT's factorised embedding (the embedder gives vectors of size E, here
LayerNorm, dropout and a projection E -> d), the learned [CLS] input vector, and a stack of
post-LayerNorm BERT layers whose attention takes an additive per-head bias computed once per
forward (:class:`BiasedAttentionLayer`).

Where [CLS] comes from (``cls``):
- ``first``: the input already has a [CLS] at position 0 (the sentence models and the
  pre-trainer pack ``[CLS] a [SEP] (b [SEP])``, ``models/packing.py``); its input vector is
  replaced by the encoder's learned ``cls`` vector and the text starts at character position 1,
  which the encoder renumbers as 0 (so a text's absolute positions are the same in both modes);
- ``prepend``: the input has no [CLS] (the tagger): the learned ``cls`` vector is inserted at
  position 0, and the output drops it again, so the caller gets states in its own layout.
Both modes use the same ``cls`` parameter, so a pre-trained [CLS] carries over to every task.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.sized import SizedEncoder
from multigrain.components.nn.biased_layer import BiasedAttentionLayer
from multigrain.components.pretrained import load_pretrained


class FactorisedBertEncoder(SizedEncoder):
    def __init__(self, input_dim: int, hidden_size: int, num_layers: int, num_heads: int,
                 intermediate_size: Optional[int], dropout: float, attention_dropout: float,
                 cls: Literal["first", "prepend"], scale: Optional[float]):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
        if cls not in ("first", "prepend"):
            raise ValueError(f"cls must be 'first' or 'prepend', got {cls!r}")
        self.input_dim, self.output_dim = input_dim, hidden_size
        self.num_heads, self.head_dim, self.cls_mode = num_heads, hidden_size // num_heads, cls
        self.cls = nn.Parameter(torch.randn(input_dim) * 0.02)
        self.embedding_norm = nn.LayerNorm(input_dim, eps=1e-12)
        self.embedding_dropout = nn.Dropout(dropout)
        self.projection = nn.Linear(input_dim, hidden_size)
        self.layers = nn.ModuleList(BiasedAttentionLayer(hidden_size, num_heads, intermediate_size or 4 * hidden_size,
                                                         dropout, attention_dropout, scale)
                                    for _ in range(num_layers))

    def init_weights(self, pretrained: Optional[str]) -> None:
        """BERT's initialisation (normal 0.02, zero biases), then a pre-training run's ``encoder.``
        tensors when ``pretrained`` names one."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
                if isinstance(module, nn.Linear) and module.bias is not None:
                    nn.init.zeros_(module.bias)
        if pretrained:
            load_pretrained(self, pretrained, "encoder.")

    def with_cls(self, inputs: torch.Tensor, mask: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor):
        """``(inputs, mask, starts, ends)`` with [CLS] at position 0 and text positions from 0:
        ``[B, T', E]``, ``[B, T']`` (T' = T + 1 when prepending)."""
        B = inputs.shape[0]
        cls = self.cls.to(inputs.dtype).expand(B, 1, -1)
        if self.cls_mode == "prepend":
            zero = starts.new_zeros(B, 1)
            return (torch.cat([cls, inputs], 1), torch.cat([mask.new_ones(B, 1), mask], 1),
                    torch.cat([zero, starts], 1), torch.cat([zero, ends], 1))
        inputs = torch.cat([cls, inputs[:, 1:]], 1)
        return inputs, mask, (starts - 1).clamp(min=0), (ends - 1).clamp(min=0)

    def run_layers(self, inputs: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``[B, T', E]`` -> ``[B, T', d]``: norm, dropout, projection, the layers."""
        x = self.projection(self.embedding_dropout(self.embedding_norm(inputs)))
        for layer in self.layers:
            x = layer(x, bias)
        return x

    def without_cls(self, states: torch.Tensor) -> torch.Tensor:
        """States in the caller's layout (the prepended [CLS] dropped)."""
        return states[:, 1:] if self.cls_mode == "prepend" else states


def key_padding_bias(mask: torch.Tensor, num_heads: int, dtype=torch.float32) -> torch.Tensor:
    """``[B, 1, 1, T]`` float: 0 at real keys, -inf at padding (broadcasts over heads and queries)."""
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))
    return bias[:, None, None, :]


class TokenPositions:
    """What the encoders read of a lattice: ``mask``, ``starts``, ``ends`` ``[B, T]`` (a
    ``LatticeBatch`` has them too); :meth:`characters` for a character-only input."""

    def __init__(self, mask: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor):
        self.mask, self.starts, self.ends = mask, starts, ends

    @classmethod
    def characters(cls, mask: torch.Tensor) -> "TokenPositions":
        index = torch.arange(mask.shape[1], device=mask.device).expand(mask.shape)
        return cls(mask, index, index)
