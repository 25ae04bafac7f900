"""The pre-training heads of Lattice-BERT (paper §2.4): masked segment prediction (MSP: BERT's
masked-token prediction over the characters *and* words of the vocabulary, with the output
matrix tied to the input embedding table, as BERT/ALBERT) and sentence order prediction (SOP,
ALBERT, Lan et al. 2020, on the [CLS] state)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from multigrain.platform.kinds import Head


@Head.register("masked_tokens")
class MaskedTokenHead(Head):
    """``logits = LayerNorm(GELU(h W_t + b_t)) E^T + b``: ``h [N, d]`` -> ``[N, V]`` with the
    embedding table ``E [V, E_dim]`` passed at call time (tied weights)."""

    def __init__(self, input_dim: int, embedding_dim: int, vocab_size: int):
        super().__init__()
        self.transform = nn.Linear(input_dim, embedding_dim)
        self.norm = nn.LayerNorm(embedding_dim, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, states: torch.Tensor, table: torch.Tensor, targets: Optional[torch.Tensor] = None) -> dict:
        logits = self.norm(F.gelu(self.transform(states))) @ table.T + self.bias
        out = {"logits": logits, "predictions": logits.argmax(-1)}
        if targets is not None:
            out["loss"] = F.cross_entropy(logits, targets) if len(targets) else logits.sum() * 0.0
        return out


@Head.register("sentence_order")
class SentenceOrderHead(Head):
    """BERT's pooler (dense + tanh) on the [CLS] state, then 2 classes (in order / swapped):
    ``cls [B, d]`` -> ``logits [B, 2]``. ``pairs [B]`` (bool, default all) marks the rows that are
    pairs of texts: the loss is the mean cross-entropy over them (``count`` of them), 0 with a
    gradient path to every parameter when there is none (data-parallel replicas need one)."""

    def __init__(self, input_dim: int):
        super().__init__()
        self.pooler = nn.Sequential(nn.Linear(input_dim, input_dim), nn.Tanh())
        self.output = nn.Linear(input_dim, 2)

    def forward(self, cls: torch.Tensor, label: Optional[torch.Tensor] = None,
                pairs: Optional[torch.Tensor] = None) -> dict:
        logits = self.output(self.pooler(cls))
        out = {"logits": logits, "predictions": logits.argmax(-1)}
        if label is not None:
            weight = torch.ones_like(label, dtype=torch.float) if pairs is None else pairs.float()
            count = weight.sum()
            each = F.cross_entropy(logits.float(), label, reduction="none")
            out["loss"] = (each * weight).sum() / count.clamp(min=1.0)
            out["count"] = count
            out["right"] = ((out["predictions"] == label).float() * weight).sum()
        return out
