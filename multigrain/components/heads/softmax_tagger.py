"""Independent per-character softmax over the tags (no transition model)."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.components.heads.crf import viterbi_decode
from multigrain.components.heads.tagging import SchemeTaggingHead
from multigrain.platform.kinds import Head


@Head.register("softmax_tagger")
class SoftmaxTaggerHead(SchemeTaggingHead):
    """``forward(states [B, n, d], mask [B, n] bool, tags [B, n] | None)`` -> ``logits`` [B, n, K],
    ``predictions`` [B, n] long (0 on padding) and, with tags, ``loss``: cross-entropy averaged
    over the real positions of the batch, and ``loss_count``, how many (data-parallel weights).

    Predictions are the per-position argmax; with ``constrained`` they are instead the most
    probable path (sum of log-softmax scores) that respects the scheme's allowed transitions.
    """

    def __init__(self, input_dim: int, labels: list[str], constrained: bool = False, scheme: Optional[str] = None,
                 dropout: float = 0.0):
        super().__init__(input_dim, labels, constrained, scheme, dropout)

    def decode(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Tag ids [B, n] (0 on padding) from logits [B, n, K]."""
        if not self.constrained:
            return logits.detach().argmax(-1).masked_fill(~mask, 0)
        K = logits.shape[-1]
        zeros = logits.new_zeros(K)
        return viterbi_decode(logits.detach().float().log_softmax(-1), mask, logits.new_zeros(K, K), zeros, zeros,
                              self.allowed)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, tags: Optional[torch.Tensor] = None,
                **unused) -> dict[str, torch.Tensor]:
        logits = self.projection(self.dropout(states))
        out = {"logits": logits, "predictions": self.decode(logits, mask)}
        if tags is not None:
            out["loss"] = nn.functional.cross_entropy(logits[mask], tags[mask])
            out["loss_count"] = mask.sum()
        return out
