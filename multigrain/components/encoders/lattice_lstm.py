"""Lattice LSTM (Zhang & Yang, ACL 2018), the lexicon baseline of PLTE: a character LSTM whose
cell at the last character of each lexicon word also receives that word's cell.

Per direction, with x_t the character input, x^w the word input and [.;.] concatenation::

    i, o, f, g   = sigma, sigma, sigma, tanh (W^c [x_t; h_{t-1}] + b^c)           (eq. 11)
    word w=(b,e): i^w, f^w, g^w = sigma, sigma, tanh (W^w [x^w; h_b] + b^w)       (eq. 13)
                  c^w = f^w * c_b + i^w * g^w          (h_b, c_b: the states *at* b)
    link gate:    l_{b,e} = sigma(W^l [x_e; c^w_{b,e}] + b^l)                     (eq. 14)
    c_t = f * c_{t-1} + i * g                        if no word ends at t       (eq. 15)
    c_t = sum_b a_{b,t} * c^w_{b,t} + a_t * g        else, where [a_t; a_{b,t}] = normalized
                                                      exp([i; l_{b,t}]) (elementwise)  (eqs. 16-17)
    h_t = o * tanh(c_t)

Single-character words (b == e) are ignored (a word cell needs the state after its first
character). ``coupled_forget_gate``: f = 1 - i, as in the released code (the paper has f).
``bidirectional``: a second lattice LSTM reads each sentence reversed (word (b, e) becomes
(n-1-e, n-1-b)); the output is [forward; backward] ``[B, n, 2 * hidden_size]``.

Two modes compute the same function with the same parameters:
- ``batched``: one loop over time steps for the whole batch. The word cells starting at step
  t are computed together ``[B, L, h]`` (slot = word length - 1, since a sentence has at most
  one word per (start, end)); at step t the cells of the words ending there are picked out
  of the last L steps' cells by one index (no loop over words).
- ``reference``: batch size 1 and Python lists of pending word cells per character, a
  transcription of the original implementation (the speed yardstick of the PLTE paper).

Input: the ``lattice`` embedder's tokens ``[B, T, d]`` (characters at 0..n-1, words after)
and ``batch["lattice"]``.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
import torch.nn.functional as F
from torch import nn

from multigrain.components.lattice.structure import word_slots
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder


class LatticeLstmDirection(nn.Module):
    """One direction's parameters and both ways of running them."""

    def __init__(self, input_dim: int, word_dim: int, hidden_size: int, coupled_forget_gate: bool):
        super().__init__()
        self.input_dim, self.word_dim, self.hidden_size = input_dim, word_dim, hidden_size
        self.coupled = coupled_forget_gate
        self.char = nn.Linear(input_dim + hidden_size, 4 * hidden_size)  # i, o, f, g
        self.word = nn.Linear(word_dim + hidden_size, 3 * hidden_size)  # i, f, g
        self.link = nn.Linear(input_dim + hidden_size, hidden_size)

    def char_gates(self, pre: torch.Tensor):
        i, o, f, g = pre.chunk(4, dim=-1)
        i, o, f, g = torch.sigmoid(i), torch.sigmoid(o), torch.sigmoid(f), torch.tanh(g)
        return i, o, (1 - i if self.coupled else f), g

    def word_cell(self, pre: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        i, f, g = pre.chunk(3, dim=-1)
        return torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)

    # ---------------------------------------------------------------- reference (batch size 1)
    def reference(self, x: torch.Tensor, words: list[tuple[int, int, torch.Tensor]]) -> torch.Tensor:
        """x ``[n, d]``; words ``[(b, e, x^w [d_w])]`` -> ``[n, h]``, one character at a time."""
        n, H = x.shape[0], self.hidden_size
        h, c = x.new_zeros(H), x.new_zeros(H)
        starting: list[list] = [[] for _ in range(n)]
        for b, e, xw in words:
            if e > b:
                starting[b].append((e, xw))
        pending: list[list[torch.Tensor]] = [[] for _ in range(n)]
        out = []
        for t in range(n):
            i, o, f, g = self.char_gates(self.char(torch.cat([x[t], h])))
            if pending[t]:
                cw = torch.stack(pending[t])  # [k, h]
                link = torch.sigmoid(self.link(torch.cat([x[t].expand(len(cw), -1), cw], dim=-1)))
                alpha = torch.cat([i.unsqueeze(0), link]).softmax(dim=0)  # exp(.) / sum exp(.)
                c = (alpha * torch.cat([g.unsqueeze(0), cw])).sum(0)
            else:
                c = f * c + i * g
            h = o * torch.tanh(c)
            out.append(h)
            for e, xw in starting[t]:
                pending[e].append(self.word_cell(self.word(torch.cat([xw, h])), c))
        return torch.stack(out) if out else x.new_zeros(0, H)

    # ---------------------------------------------------------------- batched
    def batched(self, x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor, word_mask: torch.Tensor,
                xw: torch.Tensor) -> torch.Tensor:
        """x ``[B, n, d]``; word slots ``starts/ends/word_mask [B, W]``, inputs ``xw [B, W, d_w]``
        -> ``[B, n, h]`` (states past a row's end are meaningless)."""
        B, n, d = x.shape
        H = self.hidden_size
        word_mask = word_mask & (ends > starts)
        xc = F.linear(x, self.char.weight[:, :d], self.char.bias)  # [B, n, 4h]
        w_ch = self.char.weight[:, d:]
        xl = F.linear(x, self.link.weight[:, :d], self.link.bias)  # [B, n, h]
        w_lc = self.link.weight[:, d:]
        xw_pre = F.linear(xw, self.word.weight[:, : self.word_dim], self.word.bias)  # [B, W, 3h]
        w_wh = self.word.weight[:, self.word_dim:]
        L = int((ends - starts)[word_mask].max()) + 1 if bool(word_mask.any()) else 1
        # table[b, t, l]: the word slot starting at t of length l + 1 (-1: none)
        table = torch.full((B, n, L), -1, dtype=torch.long, device=x.device)
        bb, ww = word_mask.nonzero(as_tuple=True)
        table[bb, starts[bb, ww], (ends - starts)[bb, ww]] = ww
        exists = table >= 0
        # which steps have a word ending / starting in some row (one host sync, then skipped steps
        # cost nothing); the recurrent products of h for step t+1's gates and step t's word
        # cells come from one matmul
        has_end = torch.zeros(n + 1, dtype=torch.long, device=x.device).index_add_(
            0, ends[bb, ww], torch.ones_like(ww)).tolist()
        has_start = torch.zeros(n + 1, dtype=torch.long, device=x.device).index_add_(
            0, starts[bb, ww], torch.ones_like(ww)).tolist()
        w_h = torch.cat([w_ch, w_wh])  # [4h + 3h, h]
        h_pre = x.new_zeros(B, 4 * H)  # h_{t-1} W^c_h
        c = x.new_zeros(B, H)
        no_cells = x.new_zeros(B, L, H)
        cells: list[torch.Tensor] = []  # cells[t]: [B, L, h], the word cells starting at t
        out = []
        for t in range(n):
            i, o, f, g = self.char_gates(xc[:, t] + h_pre)
            c_plain = f * c + i * g
            lo = max(0, t - L + 1)
            if has_end[t]:
                span = torch.arange(lo, t, device=x.device)
                length = t - span  # the word from start `span` to t has slot `length`
                cw = torch.stack(cells[lo:t], dim=1)[:, span - lo, length]  # [B, w, h]
                ok = exists[:, span, length]  # [B, w]
                link = torch.sigmoid(xl[:, t].unsqueeze(1) + cw @ w_lc.T)
                scores = torch.cat([i.unsqueeze(1), link], dim=1)
                keep = torch.cat([ok.new_ones(B, 1), ok], dim=1).unsqueeze(-1)
                alpha = scores.masked_fill(~keep, float("-inf")).softmax(dim=1)
                merged = (alpha * torch.cat([g.unsqueeze(1), cw], dim=1)).sum(1)
                c = torch.where(ok.any(1, keepdim=True), merged, c_plain)
            else:
                c = c_plain
            h = o * torch.tanh(c)
            out.append(h)
            if has_start[t]:
                h_pre, h_word = (h @ w_h.T).split([4 * H, 3 * H], dim=-1)
                slots = table[:, t].clamp(min=0)  # [B, L]
                pre = xw_pre.gather(1, slots.unsqueeze(-1).expand(-1, -1, 3 * H)) + h_word.unsqueeze(1)
                cells.append(self.word_cell(pre, c.unsqueeze(1)))
            else:
                h_pre = h @ w_ch.T
                cells.append(no_cells)
        return torch.stack(out, dim=1) if out else x.new_zeros(B, 0, H)


def reverse_index(n_chars: torch.Tensor, n: int) -> torch.Tensor:
    """``[B, n]``: t -> n_b - 1 - t inside each row, identity on padding (an involution)."""
    t = torch.arange(n, device=n_chars.device).unsqueeze(0)
    return torch.where(t < n_chars.unsqueeze(1), n_chars.unsqueeze(1) - 1 - t, t)


@Encoder.register("lattice_lstm")
class LatticeLstmEncoder(Encoder):
    """Lattice tokens ``[B, T, input_dim]`` -> ``[B, n, hidden_size * (2 if bidirectional else 1)]``.

    Paper settings: character, bigram and word embeddings of 50, hidden 200 (the released code:
    100 per direction, bidirectional), dropout 0.5, SGD lr 0.015 with decay 0.05 per epoch.
    """

    def __init__(self, input_dim: int, hidden_size: int = 100, bidirectional: bool = True,
                 mode: Literal["batched", "reference"] = "batched", coupled_forget_gate: bool = False,
                 dropout: float = 0.0):
        super().__init__()
        if mode not in ("batched", "reference"):
            raise ConfigurationError(f"lattice_lstm: mode must be 'batched' or 'reference', got {mode!r}")
        self.input_dim, self.hidden_size, self.mode = input_dim, hidden_size, mode
        self.directions = nn.ModuleList(
            LatticeLstmDirection(input_dim, input_dim, hidden_size, coupled_forget_gate)
            for _ in range(2 if bidirectional else 1))
        self.dropout = nn.Dropout(dropout)

    def get_input_dim(self) -> int:
        return self.input_dim

    def get_output_dim(self) -> int:
        return self.hidden_size * len(self.directions)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        lattice = (batch or {}).get("lattice")
        if lattice is None or inputs.shape[1] != lattice.mask.shape[1]:
            raise ConfigurationError("lattice_lstm needs lattices and an embedding for every lattice token: give "
                                     "the dataset reader a lattice_builder and the model the 'lattice' embedder")
        n = lattice.max_chars
        x, char_mask = inputs[:, :n], lattice.char_mask
        index, word_mask = word_slots(lattice.is_char, lattice.mask, getattr(lattice, "max_words", None))
        starts, ends = lattice.starts.gather(1, index), lattice.ends.gather(1, index)
        xw = inputs.gather(1, index.unsqueeze(-1).expand(-1, -1, inputs.shape[-1]))  # [B, W, d]
        run = self._reference if self.mode == "reference" else self._batched
        out = torch.cat([run(direction, k == 1, x, lattice.n_chars, starts, ends, word_mask, xw)
                         for k, direction in enumerate(self.directions)], dim=-1)
        return self.dropout(out) * char_mask.unsqueeze(-1)

    @staticmethod
    def _batched(direction, backward, x, n_chars, starts, ends, word_mask, xw):
        if not backward:
            return direction.batched(x, starts, ends, word_mask, xw)
        rev = reverse_index(n_chars, x.shape[1])
        last = (n_chars - 1).unsqueeze(1)
        x_rev = x.gather(1, rev.unsqueeze(-1).expand_as(x))
        out = direction.batched(x_rev, last - ends, last - starts, word_mask, xw)
        return out.gather(1, rev.unsqueeze(-1).expand_as(out))

    @staticmethod
    def _reference(direction, backward, x, n_chars, starts, ends, word_mask, xw):
        B, n, _ = x.shape
        out = x.new_zeros(B, n, direction.hidden_size)
        for b in range(B):
            nb = int(n_chars[b])
            words = [(int(s), int(e), xw[b, w]) for w, (s, e) in enumerate(zip(starts[b].tolist(), ends[b].tolist()))
                     if word_mask[b, w]]
            if backward:
                states = direction.reference(x[b, :nb].flip(0), [(nb - 1 - e, nb - 1 - s, v) for s, e, v in words])
                out[b, :nb] = states.flip(0)
            else:
                out[b, :nb] = direction.reference(x[b, :nb], words)
        return out
