"""Extractive span head (MRC): start/end logits, loss, best valid span per window."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from multigrain.platform.kinds import Head


def best_spans(start_logits: torch.Tensor, end_logits: torch.Tensor, allowed: torch.Tensor,
               max_answer_length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The highest ``start_logits[s] + end_logits[e]`` over valid spans, per row.

    start/end logits ``[W, n]``; ``allowed [W, n]`` bool (the context positions). A span is valid
    when ``s <= e <= s + max_answer_length - 1`` and every position of ``[s, e]`` is allowed.
    Returns ``starts [W]``, ``ends [W]`` (inclusive) and ``scores [W]`` (``-inf`` where a row
    has no valid span; its start and end are then 0). Cost O(W·n·L), no [n, n] matrix.
    """
    W, n = start_logits.shape
    L = max(1, min(max_answer_length, n))
    device = start_logits.device
    offsets = torch.arange(L, device=device)
    ends = torch.arange(n, device=device).unsqueeze(1) + offsets  # [n, L]
    in_range = ends < n
    ends = ends.clamp(max=n - 1)
    # number of allowed positions in [s, e] must equal its length
    count = torch.cat([allowed.new_zeros(W, 1, dtype=torch.long), allowed.long().cumsum(1)], dim=1)  # [W, n+1]
    inside = (count[:, ends + 1] - count[:, :n].unsqueeze(2)) == (offsets + 1)  # [W, n, L]
    valid = inside & in_range & allowed.unsqueeze(2)
    scores = start_logits.unsqueeze(2) + end_logits[:, ends]  # [W, n, L]
    scores = scores.masked_fill(~valid, float("-inf")).reshape(W, n * L)
    best, flat = scores.max(dim=1)
    starts = torch.div(flat, L, rounding_mode="floor")
    span_ends = starts + flat % L
    none = torch.isinf(best)
    return starts.masked_fill(none, 0), span_ends.masked_fill(none, 0), best


@Head.register("span")
class SpanHead(Head):
    """``forward(states [W, n, d], mask [W, n], context_mask [W, n], start_positions [W],
    end_positions [W])``: a linear layer gives start and end logits (padding positions get a
    very low logit); the loss is the mean of the start and end cross-entropies; the best
    valid span of each row (``best_spans``) is returned as ``span_starts``, ``span_ends``,
    ``span_scores`` (in eval mode only). Rows whose answer is not inside them are trained to
    point at position 0 (``[CLS]``), as in BERT's SQuAD recipe; decoding never returns position 0.
    """

    def __init__(self, input_dim: int, max_answer_length: int = 30, dropout: float = 0.1):
        super().__init__()
        if max_answer_length < 1:
            raise ValueError(f"max_answer_length must be >= 1, got {max_answer_length}")
        self.max_answer_length = max_answer_length
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(input_dim, 2)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, context_mask: torch.Tensor,
                start_positions: Optional[torch.Tensor] = None, end_positions: Optional[torch.Tensor] = None,
                **unused) -> dict[str, torch.Tensor]:
        logits = self.output(self.dropout(states)).masked_fill(~mask.unsqueeze(-1), -1e4)
        start_logits, end_logits = logits.unbind(-1)  # [W, n] each
        out = {"start_logits": start_logits, "end_logits": end_logits}
        if not self.training:
            starts, ends, scores = best_spans(start_logits, end_logits, context_mask & mask, self.max_answer_length)
            out.update(span_starts=starts, span_ends=ends, span_scores=scores)
        if start_positions is not None and end_positions is not None:
            ce = nn.functional.cross_entropy
            out["loss"] = (ce(start_logits, start_positions) + ce(end_logits, end_positions)) / 2
            out["loss_count"] = start_logits.shape[0]  # a mean over windows, not questions
        return out
