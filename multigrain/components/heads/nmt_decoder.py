"""The NMT decoder head: a post-LayerNorm Transformer decoder (Vaswani et al. 2017, "Transformer
base"; BiG-Transformer paper §5: "NMT = encoder of a Transformer seq2seq") over the source
encoder's states.

Target tokens ``y [B, T]`` (``BOS y_1 .. y_{T-1}``, teacher forcing) are embedded with a table
``E [V, d]`` that is also the output projection (tied, Press & Wolf 2017)::

    x_t    = sqrt(d) * E[y_t] + P(t)                      P: sinusoidal positions
    x      = num_layers x PostNormDecoderLayer(x, memory = encoder states [B, S, d], source mask)
    x      = LayerNorm(x)                                  pre_norm only: the stack's final norm
    logits = x E^T                                         [B, T, V]
    loss   = label-smoothed cross entropy (eps = label_smoothing) over the non-padding targets,
             averaged over target tokens

With ``target_positions`` (the flat indices of the non-padding targets, ``[N]``, which the
translator builds while collating, off the training thread and without a device sync) only
those N rows are projected: ``logits = x.flatten(0, 1)[positions] E^T  [N, V]`` and the same
loss. The projection onto the vocabulary is about a quarter of the small translator's matrix
products, and a third of its target positions are padding in length-bucketed batches of 16.
With ``pack_targets`` as well, the whole decoder runs on those N rows in training: embedding,
projections, FFN, LayerNorms and dropout on ``[N, d]``, only the attention on the ``[B, T]``
layout (``RealRows``), and the table's gradient is made once, the lookup's rows added into the
projection's ``[V, d]`` gradient (``components/nn/tied_embedding.py``). The same function of the
weights (tested); the dropout masks are drawn for N rows instead of B * T and a token's gradient
rows are added in another order, so a run with it is not the same float sequence as one without:
off by default, so that no shipped spec's results change.

Incremental decoding (beam search, ``components/nn/beam_search.py``): the cross-attention keys
and values are computed once per source and shared by its beams (they attend as that many
queries of the source); each step appends its
position's self-attention keys/values to a per-layer cache, which beam search reorders by
``index_select`` (``components/nn/key_value_cache.py``). :meth:`step` gives the same logits as
:meth:`forward` at that position.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from multigrain.components.nn.attention import attention_mask
from multigrain.components.nn.beam_search import Hypotheses, beam_search
from multigrain.components.nn.decoder_layer import KeyValues, PostNormDecoderLayer
from multigrain.components.nn.key_value_cache import KeyValueCache
from multigrain.components.nn.positions import sinusoidal_positions
from multigrain.components.nn.sequence import RealRows
from multigrain.components.nn.tied_embedding import TiedGradient, tied_lookup, tied_projection
from multigrain.components.nn.transformer_layer import final_norm
from multigrain.platform.kinds import Head


@dataclass
class DecoderState:
    """What incremental decoding keeps between steps for ``N = B * beam_size`` rows (row
    ``b * beam_size + k``: beam k of source b): per layer the self-attention cache
    ``[N, h, t, dh]`` (:class:`KeyValueCache`, mutated by each step and reorder) and the
    cross-attention keys/values of the B sources ``[B, h, S, dh]``; ``memory_mask [B, 1, 1, S]``
    (as the attention takes it). With ``reuse_buffers`` (a caller that consumes each step's
    log-probabilities before the next step, as beam search does) and no gradient recorded, the
    step's ``[N, V]`` logits and log-probabilities are written into ``scratch``, reused from
    step to step, and the output projection is ``output_weight`` ``E^T [d, V]``, made contiguous
    once (a matmul with the transposed view is ~10 % slower on CPU)."""

    caches: list[KeyValueCache]
    memory: list[KeyValues]
    memory_mask: torch.Tensor
    beam_size: int = 1
    reuse_buffers: bool = False
    scratch: Optional[tuple[torch.Tensor, torch.Tensor]] = None
    output_weight: Optional[torch.Tensor] = None


@Head.register("nmt_decoder")
class NmtDecoder(Head):
    """Transformer decoder over encoder states ``[B, S, input_dim]`` (see the module docstring);
    hidden size = ``input_dim``. ``vocab_size``, ``pad``/``bos``/``eos`` ids come from the model's
    target subword model. ``pre_norm``: pre-norm layers and a final LayerNorm
    (``components/nn/decoder_layer.py``); off by default (Vaswani et al.'s post-norm).
    ``pack_targets``: in training, the layers compute the non-padding target positions alone
    (see the module docstring); off by default."""

    def __init__(self, input_dim: int, vocab_size: int, pad: int = 0, bos: int = 2, eos: int = 3,
                 num_layers: int = 6, num_heads: int = 8, feedforward_dim: int = 2048, dropout: float = 0.1,
                 attention_dropout: float = 0.0, label_smoothing: float = 0.1, pre_norm: bool = False,
                 pack_targets: bool = False):
        super().__init__()
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.dim, self.vocab_size = input_dim, vocab_size
        self.pad, self.bos, self.eos = pad, bos, eos
        self.label_smoothing = label_smoothing
        self.embedding = nn.Embedding(vocab_size, input_dim, padding_idx=pad)
        nn.init.normal_(self.embedding.weight, std=input_dim ** -0.5)
        with torch.no_grad():
            self.embedding.weight[pad].zero_()
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(PostNormDecoderLayer(input_dim, num_heads, feedforward_dim, dropout,
                                                         attention_dropout, pre_norm) for _ in range(num_layers))
        if pre_norm:
            self.final_norm = final_norm(input_dim, pre_norm)
        self.pre_norm, self.pack_targets = pre_norm, pack_targets

    # pieces ------------------------------------------------------------------------------------
    def embed(self, tokens: torch.Tensor, positions: torch.Tensor,
              vectors: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``[..., T]`` token ids at ``positions`` (broadcastable to them) -> ``[..., T, d]``
        (``vectors``: their rows of the table, looked up by the caller)."""
        vectors = self.embedding(tokens) if vectors is None else vectors
        return self.dropout(vectors * math.sqrt(self.dim) + sinusoidal_positions(positions, self.dim))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Tied output projection: ``[..., d] -> [..., V]``."""
        return x @ self.embedding.weight.T

    def top(self, x: torch.Tensor) -> torch.Tensor:
        """The last layer's output as the projection takes it: the final LayerNorm of a pre-norm stack."""
        return self.final_norm(x) if self.pre_norm else x

    def memory(self, states: torch.Tensor) -> list[KeyValues]:
        return [layer.memory(states) for layer in self.layers]

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Label-smoothed cross entropy of ``logits [B, T, V]`` against ``targets [B, T]`` (or
        ``[N, V]`` against ``[N]``), mean over the non-padding targets."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                               ignore_index=self.pad, label_smoothing=self.label_smoothing)

    # teacher forcing ---------------------------------------------------------------------------
    def forward(self, states: torch.Tensor, source_mask: torch.Tensor, target_input: torch.Tensor,
                target_output: Optional[torch.Tensor] = None,
                target_positions: Optional[torch.Tensor] = None) -> dict[str, torch.Tensor]:
        """states ``[B, S, d]``, source_mask ``[B, S]`` bool, target_input ``[B, T]`` (BOS first),
        target_output ``[B, T]`` (shifted by one, EOS last, ``pad`` after). Returns ``logits
        [B, T, V]`` and, with targets, ``loss`` and ``loss_count`` (its non-padding targets).
        With ``target_positions`` (``[N]``: the flat indices of ``target_output``'s non-padding
        tokens) only ``loss`` and ``loss_count``, the projection made for those N rows alone."""
        B, T = target_input.shape
        packed = target_output is not None and target_positions is not None
        rows = RealRows(target_positions, B, T) if packed and self.pack_targets else None
        tied = TiedGradient() if rows is not None else None
        if rows is None:
            x = self.embed(target_input, torch.arange(T, device=target_input.device).unsqueeze(0))
        else:  # [N, d]: each real token at its position t = index mod T
            tokens = rows.gather(target_input)
            x = self.embed(tokens, target_positions % T, tied_lookup(self.embedding.weight, tokens, tied))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril().view(1, 1, T, T)
        memory_mask = attention_mask(1, None, source_mask).unsqueeze(1)  # [B, 1, 1, S]
        for layer, memory in zip(self.layers, self.memory(states)):
            x = layer(x, memory, memory_mask, causal, rows)
        h, targets = self.top(x), target_output
        if packed:  # the N non-padding rows alone: [N, d] and [N]
            h = h if rows is not None else h.flatten(0, 1).index_select(0, target_positions)
            targets = target_output.flatten().index_select(0, target_positions)
        logits = self.logits(h) if tied is None else tied_projection(h, self.embedding.weight, tied)
        out = {} if packed else {"logits": logits}
        if target_output is not None:
            out["loss"] = self.loss(logits, targets)
            out["loss_count"] = (target_output != self.pad).sum()
        return out

    # incremental decoding ----------------------------------------------------------------------
    def start(self, states: torch.Tensor, source_mask: torch.Tensor, beam_size: int = 1,
              reuse_buffers: bool = False) -> DecoderState:
        """The state of ``B * beam_size`` rows before step 0; the cross-attention keys/values
        are computed here, once per source (its beams share them); ``reuse_buffers``: see
        :class:`DecoderState`."""
        memory_mask = attention_mask(1, None, source_mask).unsqueeze(1)  # [B, 1, 1, S]
        return DecoderState([KeyValueCache() for _ in self.layers], self.memory(states), memory_mask,
                            beam_size, reuse_buffers)

    def step(self, state: DecoderState, tokens: torch.Tensor, t: int) -> tuple[torch.Tensor, DecoderState]:
        """The token of each row at position ``t`` (``[N]``) -> ``(log-probabilities of the next
        token [N, V], the state with position t cached)``. The state is updated in place (with
        ``reuse_buffers`` the log-probabilities are a buffer that the next step overwrites).

        Before the first step the beams of a source are one row repeated (same memory, empty
        cache); when their tokens are equal too (beam search's BOS) the step is computed once
        per source and its cache and log-probabilities repeated to the beams."""
        K = state.beam_size
        first = K > 1 and state.caches[0].length == 0 and bool((tokens.view(-1, K) == tokens[::K, None]).all())
        rows = tokens[::K] if first else tokens
        x = self.embed(rows.unsqueeze(1), torch.full((1, 1), t, device=tokens.device))  # [N or B, 1, d]
        for layer, cache, memory in zip(self.layers, state.caches, state.memory):
            x = layer.step(x, cache, memory, state.memory_mask, 1 if first else K)
        x = self.top(x[:, 0])
        if first:
            for cache in state.caches:
                cache.repeat_rows(K)
            return self.logits(x).float().log_softmax(-1).repeat_interleave(K, 0), state
        if not state.reuse_buffers or torch.is_grad_enabled():
            return self.logits(x).float().log_softmax(-1), state
        shape = (x.shape[0], self.vocab_size)
        if state.scratch is None or state.scratch[0].shape != shape or state.scratch[0].dtype != x.dtype:
            state.scratch = (x.new_empty(shape), x.new_empty(shape, dtype=torch.float32))
            state.output_weight = self.embedding.weight.T.to(x.dtype).contiguous()
        logits, log_probs = state.scratch
        torch.mm(x, state.output_weight, out=logits)
        torch.log_softmax(logits, -1, dtype=torch.float32, out=log_probs)
        return log_probs, state

    @staticmethod
    def reorder(state: DecoderState, index: torch.Tensor) -> DecoderState:
        """Rows ``index`` of the self-attention caches (in place). The memory needs no
        reordering: beam search moves rows only among the beams of one source."""
        for cache in state.caches:
            cache.reorder(index)
        return state

    def decode(self, states: torch.Tensor, source_mask: torch.Tensor, max_lengths: torch.Tensor,
               beam_size: int = 4, length_penalty: float = 0.6) -> Hypotheses:
        """Beam search (``beam_size`` 1: greedy) from encoder states ``[B, S, d]``; at most
        ``max_lengths [B]`` tokens before EOS."""
        state = self.start(states, source_mask, beam_size, reuse_buffers=True)
        return beam_search(self.step, self.reorder, state, states.shape[0], beam_size, max_lengths,
                           self.bos, self.eos, self.pad, length_penalty)
