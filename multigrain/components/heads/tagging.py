"""What the per-character tagging heads share: labels, their scheme, the scheme's allowed
transitions as buffers, and the linear projection of the states to one score per tag."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.components.tag_schemes import allowed_transitions, detect_scheme
from multigrain.platform.kinds import Head


class SchemeTaggingHead(Head):
    """Base of ``crf`` and ``softmax_tagger``: ``projection`` maps states ``[B, n, input_dim]``
    to ``[B, n, K]``; ``allowed`` is the bool triple (start_ok [K], end_ok [K], trans_ok [K, K])
    of the tag scheme (BIO/BIOES/BMES, detected from the labels unless ``scheme`` names it)."""

    def __init__(self, input_dim: int, labels: list[str], constrained: bool, scheme: Optional[str] = None,
                 dropout: float = 0.0):
        super().__init__()
        self.labels = list(labels)
        self.scheme = scheme or detect_scheme(self.labels)
        self.constrained = constrained
        self.dropout = nn.Dropout(dropout)
        self.projection = nn.Linear(input_dim, len(self.labels))
        start_ok, end_ok, trans_ok = allowed_transitions(self.labels, self.scheme)
        self.register_buffer("start_ok", start_ok, persistent=False)
        self.register_buffer("end_ok", end_ok, persistent=False)
        self.register_buffer("trans_ok", trans_ok, persistent=False)

    @property
    def allowed(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.start_ok, self.end_ok, self.trans_ok
