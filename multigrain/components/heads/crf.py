"""Linear-chain CRF head: pytorch-crf owns the transition parameters; the log-likelihood is
pytorch-crf's arithmetic without its checks of the mask (each a host sync on a GPU, three a step);
decoding is our batched Viterbi, optionally restricted to the tag scheme's allowed transitions."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torchcrf import CRF

from multigrain.components.heads.tagging import SchemeTaggingHead
from multigrain.platform.kinds import Head

try:  # built by setup.py at install; optional (no C compiler: the PyTorch decoder)
    from multigrain.components.heads import _viterbi as _native
except ImportError:  # pragma: no cover - depends on the install
    _native = None

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

    ``emissions`` [B, n, K] (any float dtype; half precision is decoded in float32); ``mask``
    [B, n] bool, padding at the end, ``mask[:, 0]`` all True;
    ``transitions`` [K, K] (from i to j), ``start``/``end`` [K] (torchcrf's parameters);
    ``allowed``: optional bool (start_ok [K], end_ok [K], trans_ok [K, K]) whose False entries
    score :data:`FORBIDDEN`.

    Same arithmetic, hence the same paths (ties to the lowest tag), as ``torchcrf.CRF.decode``.
    On the CPU (float32/float64) the compiled kernel :mod:`._viterbi` decodes; elsewhere, or
    when it was not built (no C compiler at install), :func:`_decode_torch`, with no host sync.
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
        if n == 0 or B == 0:
            return torch.zeros(B, n, dtype=torch.long, device=device)
        if device.type == "cpu" and dtype in (torch.float32, torch.float64) and _native is not None:
            return _decode_native(em, mask, trans, start, end)
        return _decode_torch(em, mask, trans, start, end)


def _decode_native(em: torch.Tensor, mask: torch.Tensor, trans: torch.Tensor, start: torch.Tensor,
                   end: torch.Tensor) -> torch.Tensor:
    """The compiled kernel: one pass per step over [K, K, B] candidates, backpointers kept as it
    goes, no op dispatch per step. Inputs as :func:`viterbi_decode` gets them, on the CPU."""
    B, n, K = em.shape
    e = em.permute(1, 2, 0).contiguous()  # [n, K, B]: the kernel's loops over sentences vectorise
    lengths = mask.sum(1, dtype=torch.int64).clamp_(min=1)  # a row with no token: decoded as one, then zeroed
    path = torch.empty(B, n, dtype=torch.long)
    arrays = [x.contiguous().numpy() for x in (e, lengths, trans, start, end)]
    _native.decode(*arrays, path.numpy(), n, K, B, e.dtype == torch.float64)
    return path.masked_fill_(~mask, 0)


def _decode_torch(em: torch.Tensor, mask: torch.Tensor, trans: torch.Tensor, start: torch.Tensor,
                  end: torch.Tensor) -> torch.Tensor:
    """Any device, few tensor ops (small ops cost their dispatch, not their size):

    - the forward loop keeps only the max (``amax`` is vectorised, ``max``'s indices are not):
      three ops per step, writing into a preallocated ``[n, K, B]`` buffer;
    - backpointers are then recovered for all steps at once, vectorised, as the lowest
      previous tag whose candidate equals the step's max; padded steps become identity maps,
      so every row is traced back from position n-1;
    - backtracking is one ``gather`` per step into a preallocated buffer (numpy indexing on
      the CPU).
    """
    B, n, K = em.shape
    device = em.device
    # [n, K, B]. Scores past a row's end are computed too but never used (their pointers
    # become the identity), so padded emissions may hold anything, even NaN.
    e = em.permute(1, 2, 0).contiguous()
    scores = _forward_scores(e, trans, start)
    pointers = _backpointers(scores, e, trans, mask)
    lengths = mask.sum(1)
    final = scores[lengths - 1, :, torch.arange(B, device=device)] + end  # [B, K]
    path = _backtrack(pointers, final.argmax(1))  # [n, B]
    return path.t().masked_fill(~mask, 0)


def _forward_scores(e: torch.Tensor, trans: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """Viterbi scores ``[n, K, B]``: best score of a path ending in tag j at step i (rows past a
    sentence's end are meaningless). e [n, K, B].

    The buffer starts as a copy of the emissions and each step adds its max into its row
    (``e + m`` is ``m + e`` bit for bit). Even rows are viewed as [K, 1, B], odd ones as
    [1, K, B]: the reduced axis alternates, so the view a step writes is the one the next reads.
    """
    n, K, B = e.shape
    scores = e.clone()
    rows: list = [None] * n
    rows[0::2] = scores[0::2].unsqueeze(2).unbind(0)  # [K, 1, B]
    rows[1::2] = scores[1::2].unsqueeze(1).unbind(0)  # [1, K, B]
    rows[0].add_(start.view(K, 1, 1))
    candidates = torch.empty(K, K, B, dtype=e.dtype, device=e.device)
    best = (torch.empty(1, K, B, dtype=e.dtype, device=e.device), torch.empty(K, 1, B, dtype=e.dtype, device=e.device))
    trans_from_first = trans.unsqueeze(2)  # [prev, cur, 1]
    trans_from_second = trans.t().unsqueeze(2)  # [cur, prev, 1]
    add, amax = torch.add, torch.amax
    for i in range(1, n):
        if i % 2:  # previous row [K, 1, B]: reduce axis 0 into [1, K, B]
            add(rows[i - 1], trans_from_first, out=candidates)
            amax(candidates, 0, True, out=best[0])
            rows[i].add_(best[0])  # max_k fl(a_k + e) == fl(max_k a_k + e): fl is monotone
        else:  # previous row [1, K, B]: reduce axis 1 into [K, 1, B]
            add(rows[i - 1], trans_from_second, out=candidates)
            amax(candidates, 1, True, out=best[1])
            rows[i].add_(best[1])
    return scores


def _backpointers(scores: torch.Tensor, e: torch.Tensor, trans: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[n-1, K, B]`` int32 (int64 for float64 scores): the lowest previous tag k whose candidate
    ``(scores[i-1, k] + trans[k, j]) + e[i, j]`` equals ``scores[i, j]``; identity on padding.

    ``candidate - max`` is +0 at a max and negative elsewhere. Read as a signed integer of the
    same width, +0 is 0 and a negative float is far below -K (its sign bit is set), so adding
    the weight K-k and taking the max over k gives K minus the lowest maximising k: integer
    add and max, no comparison op and no argmax (both are slow on the CPU)."""
    n, K, B = scores.shape
    int_type = {4: torch.int32, 8: torch.int64}[scores.element_size()]
    weight = torch.arange(K, 0, -1, dtype=int_type, device=scores.device).view(K, 1, 1, 1)
    best_weight = torch.empty(max(n - 1, 0), K, B, dtype=int_type, device=scores.device)
    chunk = max(1, _CHUNK_ELEMENTS // (K * K * B))
    for lo in range(1, n, chunk):
        hi = min(n, lo + chunk)
        cand = scores[lo - 1:hi - 1].transpose(0, 1).unsqueeze(2) + trans.view(K, 1, K, 1)  # [Kp, t, Kn, B]
        cand += e[lo:hi].unsqueeze(0)
        bits = cand.sub_(scores[lo:hi]).view(int_type)
        torch.amax(bits.add_(weight), 0, out=best_weight[lo - 1:hi - 1])
    pointers = (K - best_weight).clamp_(0, K - 1)  # the clamp only matters for NaN inputs
    identity = torch.arange(K, dtype=int_type, device=scores.device).view(1, K, 1)
    return torch.where(mask[:, 1:].t().unsqueeze(1), pointers, identity)


def _backtrack(pointers: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """Tags ``[n, B]`` from ``pointers`` [n-1, K, B] (tag at t given the tag at t+1) and the
    tag at n-1 ``last`` [B]: one gather per step into a preallocated buffer (on the CPU, numpy
    indexing on the same memory, which needs no per-step tensor views: half the time)."""
    if pointers.device.type == "cpu":
        return torch.from_numpy(_backtrack_numpy(pointers.numpy(), last.numpy()))
    return _backtrack_gather(pointers.long(), last)


def _backtrack_gather(pointers: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    n, B = pointers.shape[0] + 1, last.shape[0]
    path = torch.empty(n, 1, B, dtype=torch.long, device=last.device)
    steps, maps = path.unbind(0), pointers.unbind(0)
    steps[n - 1].copy_(last.view(1, B))
    gather = torch.gather
    for t in range(n - 1, 0, -1):
        gather(maps[t - 1], 0, steps[t], out=steps[t - 1])
    return path.view(n, B)


def _backtrack_numpy(pointers: np.ndarray, last: np.ndarray) -> np.ndarray:
    n, B = pointers.shape[0] + 1, last.shape[0]
    path = np.empty((n, B), dtype=np.int64)
    path[n - 1] = last
    rows = np.arange(B)
    for t in range(n - 1, 0, -1):
        path[t - 1] = pointers[t - 1, path[t], rows]
    return path


def log_likelihood(emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor, transitions: torch.Tensor,
                   start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """log p(tags | emissions) per sentence ``[B]``: emissions [B, n, K], tags [B, n] long, mask
    [B, n] bool (every sentence non-empty, its first position real: the readers guarantee it).

    With s(y) = start[y_1] + sum_i e_i[y_i] + sum_{i>1} trans[y_{i-1}, y_i] + end[y_L],
    log p = s(gold) - logsumexp_y s(y), the normaliser by the forward recursion
    a_i[j] = logsumexp_k (a_{i-1}[k] + trans[k, j]) + e_i[j], kept at the last real position.
    The operations and their order are ``torchcrf.CRF.forward``'s (the tests compare bit for bit),
    minus its ``mask[0].all()`` checks, which read a device value on the host."""
    e, y, m = emissions.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)  # time first
    n, B = y.shape
    rows = torch.arange(B, device=y.device)
    weight = m.float()
    gold = start[y[0]] + e[0, rows, y[0]]
    for i in range(1, n):  # sequential like torchcrf's, so the sums are the same floats
        gold = gold + transitions[y[i - 1], y[i]] * weight[i]
        gold = gold + e[i, rows, y[i]] * weight[i]
    gold = gold + end[y[weight.long().sum(0) - 1, rows]]
    alpha = start + e[0]  # [B, K]
    for i in range(1, n):
        step = torch.logsumexp(alpha.unsqueeze(2) + transitions + e[i].unsqueeze(1), dim=1)
        alpha = torch.where(m[i].unsqueeze(1), step, alpha)
    return gold - torch.logsumexp(alpha + end, dim=1)


@Head.register("crf")
class CrfHead(SchemeTaggingHead):
    """Linear emissions and a CRF.

    ``forward(states [B, n, d], mask [B, n] bool, tags [B, n] | None)`` -> ``logits`` [B, n, K]
    (the emissions), ``predictions`` [B, n] long (Viterbi path, 0 on padding) and, with tags,
    ``loss``: the negative log-likelihood averaged over the sentences of the batch (torchcrf's
    ``reduction="mean"``, i.e. summed NLL / B). ``constrained`` restricts decoding (not the
    likelihood, so ill-formed gold tags still train) to the scheme's allowed transitions.
    """

    def __init__(self, input_dim: int, labels: list[str], constrained: bool = True, scheme: Optional[str] = None,
                 dropout: float = 0.0):
        super().__init__(input_dim, labels, constrained, scheme, dropout)
        self.crf = CRF(len(self.labels), batch_first=True)

    def decode(self, logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Viterbi paths [B, n] from emissions [B, n, K]."""
        return viterbi_decode(logits, mask, self.crf.transitions, self.crf.start_transitions,
                              self.crf.end_transitions, self.allowed if self.constrained else None)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, tags: Optional[torch.Tensor] = None,
                **unused) -> dict[str, torch.Tensor]:
        logits = self.projection(self.dropout(states))
        out = {"logits": logits, "predictions": self.decode(logits, mask)}
        if tags is not None:
            crf = self.crf
            out["loss"] = -log_likelihood(logits, tags, mask, crf.transitions, crf.start_transitions,
                                          crf.end_transitions).mean()
        return out
