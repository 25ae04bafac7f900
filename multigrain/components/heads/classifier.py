"""Sentence classification head: pool the states, project to the labels."""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.platform.kinds import Head


def pool(states: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[B, n, d] states, [B, n] bool mask -> [B, d]: position 0 (``cls``), or the mean / max
    over the real positions."""
    if pooling == "cls":
        return states[:, 0]
    m = mask.unsqueeze(-1)
    if pooling == "mean":
        return (states * m).sum(1) / m.sum(1).clamp(min=1)
    if pooling == "max":
        return states.masked_fill(~m, torch.finfo(states.dtype).min).amax(1)
    raise ValueError(f"pooling must be cls, mean or max, got {pooling!r}")


@Head.register("classifier")
class ClassifierHead(Head):
    """pool -> (dense + tanh, BERT's pooler, when ``pooler``) -> dropout -> linear -> labels.

    ``forward(states [B, n, d], mask [B, n], label [B] or None)`` returns ``logits [B, C]``,
    ``probs``, ``predictions [B]`` and, with labels, the mean cross-entropy ``loss``.
    ``cls`` pooling reads position 0, where the sentence models put ``[CLS]``.
    """

    def __init__(self, input_dim: int, labels: list[str], pooling: Literal["cls", "mean", "max"] = "cls",
                 pooler: bool = True, dropout: float = 0.1):
        super().__init__()
        if not labels:
            raise ValueError("the classifier needs at least one label (the training data has none?)")
        if pooling not in ("cls", "mean", "max"):
            raise ValueError(f"pooling must be cls, mean or max, got {pooling!r}")
        self.pooling = pooling
        self.pooler = nn.Sequential(nn.Linear(input_dim, input_dim), nn.Tanh()) if pooler else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(input_dim, len(labels))

    def forward(self, states: torch.Tensor, mask: torch.Tensor, label: Optional[torch.Tensor] = None,
                **unused) -> dict[str, torch.Tensor]:
        pooled = self.pooler(pool(states, mask, self.pooling))
        logits = self.output(self.dropout(pooled))
        out = {"logits": logits, "probs": logits.softmax(-1), "predictions": logits.argmax(-1)}
        if label is not None:
            out["loss"] = nn.functional.cross_entropy(logits, label)
        return out
