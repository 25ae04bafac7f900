"""Linear-chain CRF head: pytorch-crf owns the transition parameters and the log-likelihood;
decoding is our batched Viterbi, optionally restricted to the tag scheme's allowed transitions."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn
from torchcrf import CRF

from multigrain.components.tag_schemes import allowed_transitions, detect_scheme
from multigrain.platform.kinds import Head

#: score given to a forbidden start, end or transition: large enough to lose to any valid path
#: for realistic emissions, finite so that a sentence with no valid path still gets the path
#: with fewest violations (and no inf - inf = nan).
FORBIDDEN = -1e4

#: most elements of the [K, t, K, B] candidate tensor built at once when recovering backpointers
_CHUNK_ELEMENTS = 1 << 22


def viterbi_decode(emissions: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor, start: torch.Tensor,
                   end: torch.Tensor,
                   allowed: Optional[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
    """Best tag path of every sentence: LongTensor ``[B, n]``, 0 on padded positions.

    ``emissions`` [B, n, K]; ``mask`` [B, n] bool, padding at the end, ``mask[:, 0]`` all True;
    ``transitions`` [K, K] (from i to j), ``start``/``end`` [K] (torchcrf's parameters);
    ``allowed``: optional bool (start_ok [K], end_ok [K], trans_ok [K, K]) whose False entries
    score :data:`FORBIDDEN`.

    Same arithmetic, hence the same paths (ties to the lowest tag), as ``torchcrf.CRF.decode``,
    but with no host sync and far fewer tensor ops:

    - the forward loop does three ops per step and keeps only the max (``amax``, which is
      vectorised, unlike ``max``'s indices) in a preallocated ``[n, K, B]`` buffer whose
      layout puts the reduced axis outermost;
    - backpointers are then recovered for all steps at once as the first previous tag whose
      candidate score equals the step's max (float ops only), and padded steps become the
      identity map so every row can be traced back from position n-1;
    - backtracking is one ``gather`` per step into a preallocated buffer.
    """
    with torch.no_grad():
        em = emissions.detach()
        if em.dtype in (torch.float16, torch.bfloat16):
            em = em.float()
        device, dtype = em.device, em.dtype
        trans, start, end = (x.detach().to(device=device, dtype=dtype) for x in (transitions, start, end))
        if allowed is not None:
            start_ok, end_ok, trans_ok = (a.to(device=device, dtype=torch.bool) for a in allowed)
            start = start.masked_fill(~start_ok, FORBIDDEN)
            end = end.masked_fill(~end_ok, FORBIDDEN)
            trans = trans.masked_fill(~trans_ok, FORBIDDEN)
        mask = mask.to(device=device, dtype=torch.bool)
        B, n, K = em.shape
        if n == 0:
            return torch.zeros(B, 0, dtype=torch.long, device=device)
        # [n, K, B]; padded emissions zeroed so the scores run on past a row's end stay finite
        e = em.masked_fill(~mask.unsqueeze(2), 0).permute(1, 2, 0).contiguous()
        scores = _forward_scores(e, trans, start)
        history = _backpointers(scores, e, trans, mask)
        lengths = mask.sum(1)
        final = scores[lengths - 1, :, torch.arange(B, device=device)] + end  # [B, K]
        path = torch.empty(n, 1, B, dtype=torch.long, device=device)
        steps, pointers = path.unbind(0), history.unbind(0)
        torch.argmax(final, 1, keepdim=True, out=steps[n - 1].view(B, 1))
        gather = torch.gather
        for t in range(n - 1, 0, -1):
            gather(pointers[t - 1], 0, steps[t], out=steps[t - 1])
        return path.view(n, B).t().masked_fill(~mask, 0)


def _forward_scores(e: torch.Tensor, trans: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """Viterbi scores ``[n, K, B]``: best score of a path ending in tag j at step i (rows past a
    sentence's end are meaningless). e [n, K, B]."""
    n, K, B = e.shape
    scores = torch.empty(n, K, B, dtype=e.dtype, device=e.device)
    rows, rows_prev, e_rows = scores.unbind(0), scores.unsqueeze(2).unbind(0), e.unbind(0)
    torch.add(start.unsqueeze(1), e_rows[0], out=rows[0])
    candidates = torch.empty(K, K, B, dtype=e.dtype, device=e.device)  # [prev, cur, B]
    trans_b = trans.unsqueeze(2)
    add, amax = torch.add, torch.amax
    for i in range(1, n):
        add(rows_prev[i - 1], trans_b, out=candidates)
        amax(candidates, 0, out=rows[i])
        rows[i].add_(e_rows[i])  # max_k fl(a_k + e) == fl(max_k a_k + e): fl is monotone
    return scores


def _backpointers(scores: torch.Tensor, e: torch.Tensor, trans: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[n-1, K, B]`` long: the lowest previous tag k whose candidate
    ``(scores[i-1, k] + trans[k, j]) + e[i, j]`` equals ``scores[i, j]``; identity on padding."""
    n, K, B = scores.shape
    weight = torch.arange(K, 0, -1, dtype=scores.dtype, device=scores.device).view(K, 1, 1, 1)
    history = torch.empty(max(n - 1, 0), K, B, dtype=scores.dtype, device=scores.device)
    chunk = max(1, _CHUNK_ELEMENTS // (K * K * B))
    for lo in range(1, n, chunk):
        hi = min(n, lo + chunk)
        cand = scores[lo - 1:hi - 1].transpose(0, 1).unsqueeze(2) + trans.view(K, 1, K, 1)  # [Kp, t, Kn, B]
        cand += e[lo:hi].unsqueeze(0)
        # 0 where the candidate is the max, -1 elsewhere; weight K-k then picks the lowest k
        cand.sub_(scores[lo:hi]).sign_().add_(1).mul_(weight)
        torch.amax(cand, 0, out=history[lo - 1:hi - 1])
    pointers = (K - history).long()
    identity = torch.arange(K, device=scores.device).view(1, K, 1)
    return torch.where(mask[:, 1:].t().unsqueeze(1), pointers, identity)


@Head.register("crf")
class CrfHead(Head):
    """Linear emissions and a CRF.

    ``forward(states [B, n, d], mask [B, n] bool, tags [B, n] | None)`` -> ``logits`` [B, n, K]
    (the emissions), ``predictions`` [B, n] long (Viterbi path, 0 on padding) and, with tags,
    ``loss``: the negative log-likelihood averaged over the sentences of the batch (torchcrf's
    ``reduction="mean"``, i.e. summed NLL / B). ``constrained`` restricts decoding (not the
    likelihood, so ill-formed gold tags still train) to the scheme's allowed transitions.
    """

    def __init__(self, input_dim: int, labels: list[str], constrained: bool = True, scheme: Optional[str] = None,
                 dropout: float = 0.0):
        super().__init__()
        self.labels = list(labels)
        self.scheme = scheme or detect_scheme(self.labels)
        self.constrained = constrained
        self.dropout = nn.Dropout(dropout)
        self.projection = nn.Linear(input_dim, len(self.labels))
        self.crf = CRF(len(self.labels), batch_first=True)
        start_ok, end_ok, trans_ok = allowed_transitions(self.labels, self.scheme)
        self.register_buffer("start_ok", start_ok, persistent=False)
        self.register_buffer("end_ok", end_ok, persistent=False)
        self.register_buffer("trans_ok", trans_ok, persistent=False)

    def decode(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Viterbi paths [B, n] from emissions [B, n, K]."""
        allowed = (self.start_ok, self.end_ok, self.trans_ok) if self.constrained else None
        return viterbi_decode(logits, mask, self.crf.transitions, self.crf.start_transitions,
                              self.crf.end_transitions, allowed)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, tags: Optional[torch.Tensor] = None,
                **unused) -> dict[str, torch.Tensor]:
        logits = self.projection(self.dropout(states))
        out = {"logits": logits, "predictions": self.decode(logits, mask)}
        if tags is not None:
            out["loss"] = -self.crf(logits, tags, mask=mask, reduction="mean")
        return out
