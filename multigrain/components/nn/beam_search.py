"""Batched beam search: every sentence x beam is one row of one batch per step.

With ``B`` sentences, ``K`` beams and ``V`` target tokens the decoder runs on ``N = B * K`` rows
(row ``b * K + k`` = beam k of sentence b). At step ``t`` (the t-th generated token, 0-based):

- every live beam is extended by every token; of the ``K * V`` extensions of a sentence the
  ``2K`` best are ranked. An EOS extension among the ``K`` best is a finished hypothesis of
  ``t + 1`` tokens (EOS counted) with score ``s / lp(t + 1)``, ``s`` the sum of its token
  log-probabilities and ``lp(L) = ((5 + L) / 6) ** alpha`` the GNMT length penalty (Wu et al.
  2016, eq. 14; ``alpha = 0``: raw log-probabilities); the K best finished ones of a sentence
  are kept (fairseq's and ``transformers``' rule);
- the K best non-EOS extensions become the live beams; the decoder's state is reordered to
  them by ``index_select`` on the flattened rows (the caller's ``reorder``);
- a sentence may generate at most ``max_lengths[b]`` tokens before its EOS: at
  ``t = max_lengths[b]`` only EOS is allowed;
- a sentence is done when it has K finished hypotheses and no live beam can beat the worst of
  them: log-probabilities are <= 0, so a live beam's final score is at most
  ``s_live / max_L lp(L)`` over the lengths it can still reach (``lp`` grows with L for
  alpha >= 0). Decoding stops when every sentence is done.

Beam 1 is greedy decoding: EOS finishes only when it is the most likely token, and then (for
``alpha = 0``; with ``alpha > 0`` while a longer hypothesis could still score better under the
penalty, it goes on) the sentence is done. When ``K`` is at least the number of finite
extensions at every step the search is exhaustive: it returns the best sequence of all.
``bos`` is fed at t = 0; ``bos`` and ``pad`` are never generated. No Python loop over sentences or beams; one loop over
steps, one device->host sync per step (the "all done" test).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

#: ``step(state, tokens [N] long, t) -> (log_probs [N, V], state)``; beam search may overwrite
#: the log-probabilities it is given (it adds the beams' scores to them in place)
Step = Callable[[Any, torch.Tensor, int], tuple[torch.Tensor, Any]]
#: ``reorder(state, index [N] long) -> state`` (row i of the new state = row index[i] of the old)
Reorder = Callable[[Any, torch.Tensor], Any]


def length_penalty(lengths: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT's ``((5 + L) / 6) ** alpha`` for ``lengths`` L (tokens, EOS included)."""
    return ((5.0 + lengths.float()) / 6.0) ** alpha


@dataclass
class Hypotheses:
    """The K best finished hypotheses of every sentence, best first.

    ``tokens [B, K, L]`` generated tokens without EOS, padded with ``pad``; ``lengths [B, K]``
    their token counts (EOS not counted); ``scores [B, K]`` the length-penalised scores
    (``-inf`` where a sentence has fewer than K finished hypotheses)."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    scores: torch.Tensor

    @property
    def best(self) -> torch.Tensor:
        """``[B, L]``: each sentence's best hypothesis."""
        return self.tokens[:, 0]


def beam_search(step: Step, reorder: Reorder, state: Any, batch_size: int, beam_size: int,
                max_lengths: torch.Tensor, bos: int, eos: int, pad: int, alpha: float = 0.0) -> Hypotheses:
    """Beam search over ``batch_size`` sentences (see the module docstring). ``state`` is the
    decoder's state for the ``batch_size * beam_size`` rows; ``max_lengths [B]`` long."""
    B, K = batch_size, beam_size
    device = max_lengths.device
    longest = int(max_lengths.max()) if B else 0
    shortest = int(max_lengths.min()) if B else 0
    L = longest + 1  # room for the EOS of a maximal hypothesis
    neg_inf = float("-inf")
    live_scores = torch.full((B, K), neg_inf, device=device)
    live_scores[:, 0] = 0.0  # every beam starts equal: expand only the first
    live_tokens = torch.full((B, K, L), pad, dtype=torch.long, device=device)
    done_scores = torch.full((B, K), neg_inf, device=device)
    done_tokens = torch.full((B, K, L), pad, dtype=torch.long, device=device)
    done_lengths = torch.zeros((B, K), dtype=torch.long, device=device)
    sentence_done = torch.zeros(B, dtype=torch.bool, device=device)
    rows = torch.arange(B, device=device).unsqueeze(1) * K  # [B, 1]
    # the largest penalty a live beam can still reach: at its longest possible hypothesis
    best_penalty = length_penalty(max_lengths + 1, alpha) if alpha >= 0 else None
    tokens = torch.full((B * K,), bos, dtype=torch.long, device=device)
    any_done = False
    for t in range(longest + 1):
        log_probs, state = step(state, tokens, t)
        V = log_probs.shape[-1]
        # every extension of every live beam, the best 2K of each sentence in order
        extended = log_probs.float().view(B, K, V).add_(live_scores.unsqueeze(-1))  # [B, K, V]
        extended[:, :, pad] = neg_inf
        extended[:, :, bos] = neg_inf
        if any_done:  # row writes only: a full [B, K, V] pass per step would cost ~2 ms at V = 8000 on CPU
            extended[sentence_done] = neg_inf
        if t >= shortest:  # only EOS from a sentence's length limit on
            at_limit = max_lengths <= t
            eos_scores = extended[at_limit, :, eos]
            extended[at_limit] = neg_inf
            extended[at_limit, :, eos] = eos_scores
        top_scores, flat = extended.view(B, K * V).topk(min(2 * K, K * V), dim=1)
        beam, token = flat // V, flat % V
        candidates = live_tokens.gather(1, beam.unsqueeze(-1).expand(-1, -1, L))  # [B, 2K, L]
        candidates[:, :, t] = token
        ended = token == eos

        # EOS extensions among the K best finish (length t + 1); the K best finished are kept
        ranks = torch.arange(top_scores.shape[1], device=device)
        finishing = ended & (ranks < K)
        penalised = (top_scores / length_penalty(torch.tensor(t + 1), alpha)).masked_fill(~finishing, neg_inf)
        done_scores, pick = torch.cat([done_scores, penalised], 1).topk(K, dim=1)
        done_tokens = torch.cat([done_tokens, candidates], 1).gather(1, pick.unsqueeze(-1).expand(-1, -1, L))
        done_lengths = torch.cat([done_lengths, torch.full_like(penalised, t, dtype=torch.long)], 1).gather(1, pick)

        # the K best extensions by another token continue
        live_scores, keep = top_scores.masked_fill(ended, neg_inf).topk(K, dim=1)
        beam = beam.gather(1, keep)
        token = token.gather(1, keep)
        live_tokens = candidates.gather(1, keep.unsqueeze(-1).expand(-1, -1, L))

        bound = live_scores[:, 0] / (best_penalty if best_penalty is not None
                                     else length_penalty(torch.tensor(t + 2), alpha))
        sentence_done = sentence_done | torch.isneginf(live_scores[:, 0]) | (done_scores[:, -1] >= bound)
        finished = int(sentence_done.sum())  # the step's one device -> host sync
        if finished == B:
            break
        any_done = finished > 0
        state = reorder(state, (rows + beam).view(-1))
        tokens = token.view(-1)
    out_tokens = done_tokens.masked_fill(done_tokens == eos, pad)[:, :, :max(longest, 1)]
    return Hypotheses(out_tokens, done_lengths, done_scores)
