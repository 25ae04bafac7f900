"""HRMF: hidden representation mix and fusion (Li, Sun & Wu, NLPCC 2022), a layer on a
backbone's output.

Inputs: character states H [B, n, d]; one (voted) segmentation, row ``segmentation`` of
``batch["lattice"].seg_ids [B, S, n]``; the word of each segment, ``batch["seg_words"] [B, S, W]``
(ids in the ``seg_words`` vocabulary; 0 = no word, e.g. ``[CLS]``). For word t = chars i..j
(paper §4.1-4.3):

    v_t     = tanh(e_t W1 + b1) W2 + b2                                     (eq. 2)
    score_k = cos(h_k, v_t)                                                  (eq. 3)
    h^w_k   = h_k + a_k v_t,  a = softmax_k(score) over the word's characters,
              or score_k / sum_m score_m with ``normalization="sum"``       (eq. 4, the paper's;
              it is unstable when the cosines nearly cancel, hence not the default)
    p       = argmax_k score_k, the key character                            (eq. 5)
    f = e^(λ-1), g = (1-f)/(j-i)                                             (eqs. 7-8)
    ~h_p    = f h^w_p + g sum_{m != p} h^w_m;  ~h_k = g h^w_p + (1-g) h^w_k   (eq. 6; 1-char words
              are left as h^w)
    H1 = MHA(~H), H2 = MHA masked to Ω (key characters of multi-character words and the
    single-character words; padding masked in both); out = μ H1 + (1-μ) H2   (eqs. 10-13)

λ (init 0.9) and μ (init 0.5) are learnable scalars; segments with word id 0 get no word vector
(their characters still take part in mixing and attention). The attentions follow eqs. 10-11:
per head softmax(Q W_q (K W_k)^T / sqrt(d_h)) V W_v, heads concatenated, no output projection
(a :class:`MultiHeadAttention` of ``components/nn`` with ``output_projection=False``).
Every per-word step is a scatter/gather over the segment ids.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.sized import SizedEncoder
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.old_names import accept_old_names
from multigrain.components.vectors import load_vec_into
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder
from multigrain.platform.vocab import Vocabulary


def _gather_chars(per_segment: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """[B, W+1, ...] values per segment -> [B, n, ...] values per character."""
    index = slots.view(*slots.shape, *([1] * (per_segment.dim() - 2))).expand(*slots.shape, *per_segment.shape[2:])
    return per_segment.gather(1, index)


def _scatter_segments(values: torch.Tensor, slots: torch.Tensor, size: int, reduce: str) -> torch.Tensor:
    """[B, n, ...] per character -> [B, size, ...] reduced per segment ("sum", "amax", "amin")."""
    index = slots.view(*slots.shape, *([1] * (values.dim() - 2))).expand_as(values)
    out = values.new_zeros(values.shape[0], size, *values.shape[2:])
    return out.scatter_reduce(1, index, values, reduce, include_self=False)


@Encoder.register("hrmf")
class HrmfEncoder(SizedEncoder):
    """``forward(inputs [B, n, d], mask [B, n], batch) -> [B, n, d]`` (see the module docstring).

    ``word_dim``: size of the word embeddings e_t (``seg_words`` vocabulary), initialised from
    ``pretrained_file`` (``.vec``) when given and then frozen unless ``freeze_words`` is false
    (the paper fixes its pretrained vectors; random ones are trained by default). Archives
    saved before ``components/nn`` named the attentions' projections ``query``, ``key``,
    ``value``; they load into ``q``, ``k``, ``v``.
    """
    weight_sources = ("pretrained_file",)

    def __init__(self, input_dim: int, vocab: Vocabulary, word_dim: int = 200, num_heads: int = 8,
                 lambda_init: float = 0.9, mu_init: float = 0.5,
                 normalization: Literal["softmax", "sum"] = "softmax", segmentation: int = 0,
                 pretrained_file: Optional[str] = None, freeze_words: Optional[bool] = None,
                 dropout: float = 0.1):
        super().__init__()
        if normalization not in ("softmax", "sum"):
            raise ConfigurationError(f"hrmf: normalization must be 'softmax' or 'sum', got {normalization!r}")
        self.input_dim = self.output_dim = input_dim
        self.normalization, self.segmentation = normalization, segmentation
        self.words = nn.Embedding(max(2, vocab.size("seg_words")), word_dim, padding_idx=0)
        nn.init.normal_(self.words.weight, std=word_dim ** -0.5)
        with torch.no_grad():
            self.words.weight[0].zero_()
            if pretrained_file:
                load_vec_into(self.words.weight, vocab.tokens("seg_words"), pretrained_file)
        freeze = bool(pretrained_file) if freeze_words is None else freeze_words
        self.words.weight.requires_grad_(not freeze)
        self.w1 = nn.Linear(word_dim, input_dim)
        self.w2 = nn.Linear(input_dim, input_dim)
        self.lam = nn.Parameter(torch.tensor(float(lambda_init)))
        self.mu = nn.Parameter(torch.tensor(float(mu_init)))
        self.unmasked = MultiHeadAttention(input_dim, num_heads, output_projection=False)
        self.masked = MultiHeadAttention(input_dim, num_heads, output_projection=False)
        self.dropout = nn.Dropout(dropout)
        accept_old_names(self, {f"{attention}.{old}.": f"{attention}.{new}." for attention in ("unmasked", "masked")
                                for old, new in (("query", "q"), ("key", "k"), ("value", "v"))})

    # the paper's steps -------------------------------------------------------------------------
    def word_vectors(self, word_ids: torch.Tensor) -> torch.Tensor:
        """Eq. 2: ``[B, W]`` ids -> v ``[B, W, d]``."""
        return self.w2(torch.tanh(self.w1(self.words(word_ids))))

    def inject(self, h: torch.Tensor, seg: torch.Tensor, v: torch.Tensor, has_word: torch.Tensor):
        """Eqs. 3-4. h [B, n, d]; seg [B, n] (-1 = padding); v [B, W, d]; has_word [B, W] bool.
        Returns (h^w [B, n, d], score [B, n])."""
        B, n, _ = h.shape
        W = v.shape[1]
        slots = seg.masked_fill(seg < 0, W)
        v_seg = torch.cat([v, v.new_zeros(B, 1, v.shape[2])], dim=1)
        word_seg = torch.cat([has_word, has_word.new_zeros(B, 1)], dim=1)
        v_char = _gather_chars(v_seg, slots)  # [B, n, d]
        score = nn.functional.cosine_similarity(h, v_char, dim=-1, eps=1e-8)  # [B, n]
        if self.normalization == "softmax":
            top = _scatter_segments(score, slots, W + 1, "amax")
            e = (score - _gather_chars(top.detach(), slots)).exp()
            weight = e / _gather_chars(_scatter_segments(e, slots, W + 1, "sum"), slots)
        else:
            weight = score / _gather_chars(_scatter_segments(score, slots, W + 1, "sum"), slots)
        weight = weight * _gather_chars(word_seg, slots) * (seg >= 0)
        return h + weight.unsqueeze(-1) * v_char, score

    def mix(self, hw: torch.Tensor, seg: torch.Tensor, score: torch.Tensor):
        """Eqs. 5-8. Returns (mixed states [B, n, d], Ω [B, n] bool: key characters of
        multi-character words and single-character words)."""
        B, n, _ = hw.shape
        real = seg >= 0
        size = n + 1
        slots = seg.masked_fill(~real, n)
        positions = torch.arange(n, device=hw.device).expand(B, n)
        length = _gather_chars(_scatter_segments(real.long(), slots, size, "sum"), slots)  # [B, n]
        best = _gather_chars(_scatter_segments(score, slots, size, "amax"), slots)
        first_best = positions.masked_fill(score != best, n)  # ties: the first character
        key = _gather_chars(_scatter_segments(first_best, slots, size, "amin"), slots)  # [B, n]
        is_key = positions == key
        f = torch.exp(self.lam - 1)
        g = ((1 - f) / (length - 1).clamp(min=1)).unsqueeze(-1)  # [B, n, 1]
        h_key = hw.gather(1, key.clamp(max=n - 1).unsqueeze(-1).expand_as(hw))
        others = _gather_chars(_scatter_segments(hw, slots, size, "sum"), slots) - hw
        mixed = torch.where(is_key.unsqueeze(-1), f * hw + g * others, g * h_key + (1 - g) * hw)
        multi = (length > 1).unsqueeze(-1)
        omega = real & (is_key | (length == 1))
        return torch.where(multi, mixed, hw), omega

    def fuse(self, mixed: torch.Tensor, mask: torch.Tensor, omega: torch.Tensor) -> torch.Tensor:
        """Eqs. 10-13."""
        h1 = self.unmasked(mixed, key_mask=mask)
        h2 = self.masked(mixed, key_mask=omega & mask)
        return self.mu * h1 + (1 - self.mu) * h2

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        batch = batch or {}
        lattice, seg_words = batch.get("lattice"), batch.get("seg_words")
        if lattice is None or lattice.seg_ids is None or seg_words is None:
            raise ConfigurationError("hrmf needs a segmentation: give the reader a lattice_builder that produces "
                                     "seg_ids (voting, or segmenter) and use a sentence model")
        if not 0 <= self.segmentation < lattice.seg_ids.shape[1]:
            raise ConfigurationError(f"hrmf.segmentation {self.segmentation}: the lattices have "
                                     f"{lattice.seg_ids.shape[1]} segmentations")
        n = inputs.shape[1]
        seg = lattice.seg_ids[:, self.segmentation, :n].masked_fill(~mask, -1)
        word_ids = seg_words[:, self.segmentation]
        v = self.word_vectors(word_ids)
        hw, score = self.inject(inputs, seg, v, word_ids != 0)
        mixed, omega = self.mix(hw, seg, score)
        return self.dropout(self.fuse(mixed, mask, omega))
