"""BiG-Transformer (Shu et al., IJCNN 2020), paper §III: characters attend over a bipartite graph.

Characters on one side; on the other the lexicon words of the sentence and one sentence node.
With ``H^0 = proj(x) + P(i)`` (sinusoidal positions on characters, eq. 9), each layer l computes
(§III-B, Algorithm 1)::

    o_w = sum_{j in span(w)} h_j                  word states, no parameters       (eq. 4)
    s   = mean_i(h_i) W_s^l                        the sentence node                (eq. 5)
    U_i = [o_w for every word w containing i] (+ h_i, the character as a length-1 word)
    h_i <- MultiHeadAtt(h_i, [U_i; s])             keys *and values* from [U_i; s]  (eqs. 6-8)
    H   <- LayerNorm(H + attention), LayerNorm(H + FFN(H))

(eq. 7 writes the values as H W^V, which cannot match the keys' length: a typo.)

Flags (the paper's ablations, §IV-G): ``local``: ``lexicon`` (the words containing i, the
"dynamic local connection"), ``adjacent`` (h_{i-1}, h_{i+1}, as the radical connections of
Star-Transformer) or ``none``; ``global_node``: the sentence node (the "fixed global
connection"); ``include_self``: h_i itself (on by default, so with ``adjacent`` a character
sees i-1, i, i+1).

Three exact implementations of the same attention (:meth:`MultiHeadAttention.mixed` of
``components/nn``), chosen by ``attention``:
- ``dense``: shared columns [W word slots; s] with the containment mask ``[B, n, W + 1]``
  (``lattice.structure.containment_mask``) plus per-character columns (self, neighbours);
  O(n * m) - fast on short sentences;
- ``gather``: each character gathers the K words that contain it (K = the largest
  words-per-character of the batch) into ``[B, n, K, d]``; O(n * K), for long inputs;
- ``ragged``: one score per (character, word) pair, P = summed word length, normalised per
  character with scatter ops; O(P + n), no padding to the batch's largest K: per-character
  cost stays flat however long the input;
- ``auto`` (default): ``dense`` up to ``dense_max_chars`` characters (64: on a CPU ``ragged`` is
  faster from about 64 characters, see benchmarks/ner_speed.py), ``ragged`` beyond.
None builds a [n, n] or [T, T] attention.

Input: characters ``[B, n, d_in]`` (``char_bigram`` embedder; with the ``lattice`` embedder
its word tokens are ignored: BiG builds word states from characters) and, for ``lexicon``,
``batch["lattice"]`` for the word spans. Output ``[B, n, hidden_size]``, zeros at padding.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch
from torch import nn

from multigrain.components.encoders.sized import SizedEncoder
from multigrain.components.lattice.structure import containment_mask, word_slots
from multigrain.components.nn.attention import MultiHeadAttention
from multigrain.components.nn.char_input import CharInput
from multigrain.components.nn.old_names import accept_old_names
from multigrain.components.nn.sequence import masked_mean, shift
from multigrain.components.nn.transformer_layer import PostNormTransformerLayer, final_norm
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Encoder


# ------------------------------------------------------------------------------- structure
class BipartiteWords:
    """The words of a batch as BiG sees them: slot spans ``starts/ends [B, W]``, ``mask [B, W]``."""

    def __init__(self, starts: torch.Tensor, ends: torch.Tensor, mask: torch.Tensor, longest: Optional[int] = None):
        self.starts, self.ends, self.mask = starts, ends, mask
        self.longest = longest  # at least the longest word's length, when known without the device

    @classmethod
    def from_lattice(cls, lattice, min_length: int = 1) -> "BipartiteWords":
        index, mask = word_slots(lattice.is_char, lattice.mask, getattr(lattice, "max_words", None))
        starts, ends = lattice.starts.gather(1, index), lattice.ends.gather(1, index)
        return cls(starts, ends, mask & (ends - starts + 1 >= min_length), getattr(lattice, "longest_word", None))

    @classmethod
    def empty(cls, batch_size: int, device) -> "BipartiteWords":
        z = torch.zeros(batch_size, 0, dtype=torch.long, device=device)
        return cls(z, z, z.bool())

    def states(self, h: torch.Tensor) -> torch.Tensor:
        """Word states o_w = sum of the character states of the span: ``[B, W, d]`` (eq. 4),
        from a cumulative sum (O(n d + W d))."""
        B, n, d = h.shape
        prefix = torch.cat([h.new_zeros(B, 1, d), h.cumsum(1)], dim=1)  # [B, n + 1, d]
        hi = (self.ends + 1).clamp(max=n).unsqueeze(-1).expand(-1, -1, d)
        lo = self.starts.clamp(max=n).unsqueeze(-1).expand(-1, -1, d)
        return (prefix.gather(1, hi) - prefix.gather(1, lo)) * self.mask.unsqueeze(-1)

    def pairs(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Every (character, word) containment as two flat indices ``[P]``: the character
        ``b * n + i`` and the word slot ``b * W + w``, ordered by (b, w, i); P = the summed
        length of the words."""
        B, W = self.mask.shape
        device = self.mask.device
        if self.longest is not None:  # an upper bound: offsets past a word's end are masked below
            length = self.longest
        elif W == 0 or not bool(self.mask.any()):
            length = 0
        else:
            length = int(((self.ends - self.starts + 1) * self.mask).max())
        if W == 0 or length == 0:
            empty = torch.zeros(0, dtype=torch.long, device=device)
            return empty, empty
        offsets = torch.arange(length, device=device)
        chars = self.starts.unsqueeze(-1) + offsets  # [B, W, L]
        inside = self.mask.unsqueeze(-1) & (chars <= self.ends.unsqueeze(-1)) & (chars < n)
        b, w, o = inside.nonzero(as_tuple=True)
        return b * n + chars[b, w, o], b * W + w

    def containing(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """For each character the word slots that contain it: ``(index [B, n, K], valid [B, n, K])``,
        in slot order; K = the largest number of words over one character (at least 1).

        Built from the (character, word) pairs, P = sum of word lengths, with one sort: no
        ``[n, W]`` tensor."""
        B, W = self.mask.shape
        device = self.mask.device
        if W == 0 or not bool(self.mask.any()):
            return torch.zeros(B, n, 1, dtype=torch.long, device=device), torch.zeros(B, n, 1, dtype=torch.bool,
                                                                                     device=device)
        key, w = self.pairs(n)
        w = w % W
        order = torch.sort(key, stable=True).indices  # by (b, char), words in slot order
        key, w = key[order], w[order]
        counts = torch.bincount(key, minlength=B * n)
        first = torch.cumsum(counts, 0) - counts
        slot = torch.arange(key.numel(), device=device) - first[key]
        K = int(counts.max())
        index = torch.zeros(B * n, K, dtype=torch.long, device=device)
        valid = torch.zeros(B * n, K, dtype=torch.bool, device=device)
        index[key, slot] = w
        valid[key, slot] = True
        return index.view(B, n, K), valid.view(B, n, K)


# ------------------------------------------------------------------------------- layer
class BigLayer(PostNormTransformerLayer):
    """One BiG-Transformer layer: bipartite attention (:meth:`attend`), add & norm, FFN, add & norm."""

    def __init__(self, dim: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 local: str, global_node: bool, include_self: bool, pre_norm: bool = False):
        attention = MultiHeadAttention(dim, num_heads, dropout=attention_dropout)
        # W_s of eq. 5, drawn before the FFN: a seeded initialisation stays that of the earlier runs
        sentence = nn.Linear(dim, dim, bias=False) if global_node else None
        super().__init__(attention, ffn_dim, dropout, pre_norm=pre_norm)
        self.sentence = sentence
        self.local, self.include_self = local, include_self

    def attend(self, h: torch.Tensor, char_mask: torch.Tensor, words: BipartiteWords, mode: str,
               containment: Optional[torch.Tensor] = None,
               containing: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        """The bipartite multi-head attention of eqs. 6-8: ``[B, n, d] -> [B, n, d]``.

        Keys and values are projected once per node (character, word, sentence) and then laid out
        as columns shared by all characters ``[B, S, h*dh]`` (dense word slots, the sentence node)
        or owned by each character ``[B, n, K, h*dh]`` (itself, its neighbours, gathered words).
        """
        att = self.attention
        B, n, _ = h.shape
        pairs = None  # ragged: (query index [P] into B * n, keys [P, e], values [P, e])
        shared: list[tuple] = []  # (keys [B, S, e], values [B, S, e], allowed [B, n, S])
        own: list[tuple] = []  # (keys [B, n, K, e], values [B, n, K, e], allowed [B, n, K])
        kh, vh = att.k(h), att.v(h)
        if self.include_self:
            own.append((kh.unsqueeze(2), vh.unsqueeze(2), char_mask.unsqueeze(2)))
        if self.local == "adjacent":
            for by in (1, -1):
                own.append((shift(kh, by).unsqueeze(2), shift(vh, by).unsqueeze(2),
                            (shift(char_mask, by) & char_mask).unsqueeze(2)))
        if self.local == "lexicon" and words.mask.shape[1]:
            o = words.states(h)
            ko, vo = att.k(o), att.v(o)  # [B, W, h*dh]: each word projected once
            if mode == "dense":
                shared.append((ko, vo, containment))
            elif mode == "ragged":
                chars, slots = containing  # [P], [P]
                pairs = (chars, ko.flatten(0, 1)[slots], vo.flatten(0, 1)[slots])
            else:
                index, valid = containing  # [B, n, K]
                flat = index.view(B, -1, 1).expand(-1, -1, ko.shape[-1])
                K = index.shape[2]
                own.append((ko.gather(1, flat).view(B, n, K, -1), vo.gather(1, flat).view(B, n, K, -1), valid))
        if self.sentence is not None:
            s = self.sentence(masked_mean(h, char_mask))  # [B, 1, d]
            shared.append((att.k(s), att.v(s), char_mask.new_ones(B, n, 1)))

        def joined(parts, dim):
            if not parts:
                return None, None, None
            return tuple(torch.cat(column, dim=d) for column, d in zip(zip(*parts), (dim, dim, -1)))

        return att.mixed(h, *joined(shared, 1), *joined(own, 2), pairs=pairs)


# ------------------------------------------------------------------------------- encoder
@Encoder.register("big")
class BigEncoder(SizedEncoder):
    """Characters ``[B, n, input_dim]`` (+ lattice words) -> ``[B, n, hidden_size]``.

    Paper settings (Table I): 8 heads for NER, 6 for classification; the layer count and model
    size are not given (the NER runs used BERT): defaults 2 layers of 256 with 8 heads.
    ``min_word_length``: words shorter than this are ignored (the lexicon builder already
    drops single characters by default). Archives saved before ``components/nn`` named the
    input projection and position table ``projection``, ``positions``; they load into
    ``char_input``. ``pre_norm``: each layer attends from ``LayerNorm(h)`` (word states and the
    sentence node built from it) and adds to ``h`` unnormalised, the stack ending with a
    LayerNorm (``components/nn/transformer_layer.py``); off by default (the paper's post-norm).
    ``scale_embeddings``: ``H^0 = sqrt(hidden_size) * proj(x) + P(i)`` (``components/nn/char_input.py``
    says why); off by default.
    """

    def __init__(self, input_dim: int, hidden_size: int = 256, num_layers: int = 2, num_heads: int = 8,
                 ffn_dim: Optional[int] = None, dropout: float = 0.1, attention_dropout: float = 0.1,
                 local: Literal["lexicon", "adjacent", "none"] = "lexicon", global_node: bool = True,
                 include_self: bool = True, attention: Literal["auto", "dense", "gather", "ragged"] = "auto",
                 dense_max_chars: int = 64, min_word_length: int = 1,
                 positions: Literal["sinusoidal", "learned", "none"] = "sinusoidal", max_length: int = 512,
                 pre_norm: bool = False, scale_embeddings: bool = False):
        super().__init__()
        if local not in ("lexicon", "adjacent", "none"):
            raise ConfigurationError(f"big: local must be 'lexicon', 'adjacent' or 'none', got {local!r}")
        if attention not in ("auto", "dense", "gather", "ragged"):
            raise ConfigurationError(f"big: attention must be 'auto', 'dense', 'gather' or 'ragged', "
                                     f"got {attention!r}")
        if local == "none" and not global_node and not include_self:
            raise ConfigurationError("big: local='none', global_node=false and include_self=false leave a character "
                                     "nothing to attend to")
        self.input_dim = input_dim
        self.hidden_size = self.output_dim = hidden_size
        self.local, self.global_node, self.include_self = local, global_node, include_self
        self.attention, self.dense_max_chars, self.min_word_length = attention, dense_max_chars, min_word_length
        self.char_input = CharInput(input_dim, hidden_size, dropout, positions, max_length, scale_embeddings)
        self.layers = nn.ModuleList(
            BigLayer(hidden_size, num_heads, ffn_dim or 4 * hidden_size, dropout, attention_dropout, local,
                     global_node, include_self, pre_norm)
            for _ in range(num_layers))
        self.pre_norm = pre_norm
        if pre_norm:
            self.final_norm = final_norm(hidden_size, pre_norm)
        accept_old_names(self, {"projection.": "char_input.projection.", "positions.": "char_input.positions."})

    def words(self, batch: Optional[dict], batch_size: int, device) -> BipartiteWords:
        if self.local != "lexicon":
            return BipartiteWords.empty(batch_size, device)
        lattice = (batch or {}).get("lattice")
        if lattice is None:
            raise ConfigurationError("big with local='lexicon' needs lattices: give the dataset reader a "
                                     "lattice_builder (e.g. {type: 'lexicon'})")
        return BipartiteWords.from_lattice(lattice, self.min_word_length)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, batch: Optional[dict] = None) -> torch.Tensor:
        h, char_mask = self.char_input(inputs, mask, batch)
        B, n, _ = h.shape
        words = self.words(batch, B, h.device)
        mode = self.attention if self.attention != "auto" else ("dense" if n <= self.dense_max_chars else "ragged")
        containment = containing = None
        if self.local == "lexicon":
            if mode == "dense":
                containment = self.containment(batch, words, char_mask)
            elif mode == "ragged":
                containing = words.pairs(n)
            else:
                containing = words.containing(n)
        h = h * char_mask.unsqueeze(-1)
        for layer in self.layers:
            h = layer(h, char_mask, words, mode, containment, containing) * char_mask.unsqueeze(-1)
        if self.pre_norm:
            h = self.final_norm(h) * char_mask.unsqueeze(-1)
        return h

    def containment(self, batch: dict, words: BipartiteWords, char_mask: torch.Tensor) -> torch.Tensor:
        """``[B, n, W]``: the word columns of the lattice package's ``containment_mask``."""
        lattice = batch["lattice"]
        W = words.mask.shape[1]
        mask = containment_mask(lattice.starts, lattice.ends, lattice.is_char, lattice.mask,
                                max_chars=char_mask.shape[1], max_words=W)[:, :, :W]
        return mask & words.mask.unsqueeze(1)
