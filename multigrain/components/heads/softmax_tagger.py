"""Independent per-character softmax over the tags (no transition model)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.platform.kinds import Head


@Head.register("softmax_tagger")
class SoftmaxTaggerHead(Head):
    """``forward(states [B, n, d], mask [B, n] bool, tags [B, n] | None)`` -> ``logits`` [B, n, K],
    ``predictions`` [B, n] (argmax, 0 on padding) and, with tags, ``loss`` (cross-entropy
    averaged over real positions)."""

    def __init__(self, input_dim: int, labels: list[str], dropout: float = 0.0):
        super().__init__()
        self.labels = list(labels)
        self.dropout = nn.Dropout(dropout)
        self.projection = nn.Linear(input_dim, len(self.labels))

    def forward(self, states: torch.Tensor, mask: torch.Tensor, tags: Optional[torch.Tensor] = None,
                **unused) -> dict[str, torch.Tensor]:
        logits = self.projection(self.dropout(states))
        out = {"logits": logits, "predictions": logits.argmax(-1).masked_fill(~mask, 0)}
        if tags is not None:
            out["loss"] = nn.functional.cross_entropy(logits[mask], tags[mask])
        return out
