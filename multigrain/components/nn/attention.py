"""Multi-head attention, the one every encoder uses (Vaswani et al. 2017, §3.2.2).

:class:`MultiHeadAttention` holds the projections ``q, k, v`` (d -> h*dh) and ``out``
(h*dh -> d, or none: HRMF concatenates its heads, HRMF paper §4.3, eqs. 10-11) and attends
in three ways:

- ``forward``: every query over one key set, masked per (query, key) or per key, optionally
  with relation tables (PLTE paper §4.2, eqs. 3-4) computed by gather/scatter
  (:func:`relation_attention`), never as ``[B, T, T, d]``;
- ``key_values`` + ``attend``: ``forward`` in two halves, the keys and values projected once
  and kept by the caller (a decoder's cache, incremental decoding);
- ``weights``: the attention probabilities ``[B, h, Tq, Tk]`` alone, for a caller that
  pools them within words before the values (MWA paper §2.2, eqs. 2-5);
- ``mixed``: a query attends to shared keys ``[B, S, d]`` *and* keys of its own
  ``[B, n, K, d]`` or ragged ``(query, key)`` pairs in one softmax (Star-Transformer
  satellites, BiG's bipartite columns); O(n (S + K)) or O(P), never ``[n, n]``.

Fully masked query rows (padding) are given every key in ``forward`` and ``weights``, so
that the softmax stays finite (the callers zero padded outputs); in ``mixed`` a query with
no key gets a zero attention vector.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from multigrain.components.nn.sequence import RealRows


def relation_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
                       rel: Optional[torch.Tensor] = None, rk: Optional[torch.Tensor] = None,
                       rv: Optional[torch.Tensor] = None, dropout: float = 0.0) -> torch.Tensor:
    """Attention with relation terms (Shaw et al. 2018; PLTE paper §4.2, eqs. 3-4).

    q ``[B, h, Tq, dh]``, k/v ``[B, h, Tk, dh]``, allowed ``[B, Tq, Tk]`` bool; optional
    rel ``[B, Tq, Tk]`` long ids into rk/rv ``[R, dh]``::

        score_ij = (q_i.k_j + q_i.rk[rel_ij]) / sqrt(dh)
        out_i    = sum_j a_ij (v_j + rv[rel_ij])

    ``q_i.rk[r]`` is computed once per relation as ``[B, h, Tq, R]`` and gathered by ``rel``;
    ``sum_j a_ij rv[rel_ij]`` scatter-adds ``a`` into ``[B, h, Tq, R]`` then multiplies by rv.
    Nothing of shape ``[B, Tq, Tk, dh]`` is built. Returns ``[B, h, Tq, dh]``.
    """
    B, h, Tq, dh = q.shape
    q = q / math.sqrt(dh)
    scores = q @ k.transpose(-1, -2)  # [B, h, Tq, Tk]
    if rel is not None:
        index = rel.unsqueeze(1).expand(B, h, Tq, rel.shape[-1])
        scores.add_((q @ rk.T).gather(-1, index))  # in place: one [B, h, Tq, Tk] temporary less
    allowed = allowed | ~allowed.any(-1, keepdim=True)
    a = scores.masked_fill_(~allowed.unsqueeze(1), float("-inf")).softmax(-1)
    a = F.dropout(a, dropout) if dropout > 0 else a
    out = a @ v
    if rel is not None:
        per_relation = a.new_zeros(B, h, Tq, rk.shape[0]).scatter_add_(-1, index, a)  # [B, h, Tq, R]
        out = out + per_relation @ rv
    return out


def attention_mask(query_length: int, allowed: Optional[torch.Tensor], key_mask: Optional[torch.Tensor]):
    """``[B, Tq, Tk]`` bool from ``allowed [B, Tq, Tk]`` or ``key_mask [B, Tk]``; a query row
    with no allowed key gets every key."""
    mask = allowed if allowed is not None else key_mask.unsqueeze(1).expand(-1, query_length, -1)
    return mask | ~mask.any(-1, keepdim=True)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, ``num_heads`` heads of ``head_dim`` (default ``dim // num_heads``;
    ``num_heads * head_dim`` need not equal ``dim``: ``out`` maps it back). With
    ``num_relations`` it owns relation tables RK, RV ``[num_relations, head_dim]`` (shared by
    the heads) and ``forward`` needs ``rel``. ``output_projection=False``: no ``out``, the
    heads are concatenated (then ``num_heads * head_dim`` must be ``dim``)."""

    def __init__(self, dim: int, num_heads: int, head_dim: Optional[int] = None, dropout: float = 0.0,
                 num_relations: int = 0, output_projection: bool = True):
        super().__init__()
        if head_dim is None:
            if dim % num_heads:
                raise ValueError(f"dim {dim} is not a multiple of num_heads {num_heads}")
            head_dim = dim // num_heads
        self.num_heads, self.head_dim, self.dropout = num_heads, head_dim, dropout
        inner = num_heads * head_dim
        if not output_projection and inner != dim:
            raise ValueError(f"without an output projection num_heads * head_dim ({inner}) must be dim ({dim})")
        self.q, self.k, self.v = nn.Linear(dim, inner), nn.Linear(dim, inner), nn.Linear(dim, inner)
        self.out = nn.Linear(inner, dim) if output_projection else nn.Identity()
        self.num_relations = num_relations
        if num_relations:
            self.rk = nn.Parameter(torch.empty(num_relations, head_dim))
            self.rv = nn.Parameter(torch.empty(num_relations, head_dim))
            nn.init.xavier_uniform_(self.rk)
            nn.init.xavier_uniform_(self.rv)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, T, h*dh] -> [B, h, T, dh]`` (``[B, n, K, h*dh] -> [B, h, n, K, dh]``)."""
        x = x.unflatten(-1, (self.num_heads, self.head_dim))
        return x.transpose(1, 2) if x.dim() == 4 else x.permute(0, 3, 1, 2, 4)

    def merge(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, h, T, dh] -> [B, T, d]`` through ``out``."""
        return self.out(x.transpose(1, 2).flatten(-2))

    def forward(self, query: torch.Tensor, key: Optional[torch.Tensor] = None,
                allowed: Optional[torch.Tensor] = None, key_mask: Optional[torch.Tensor] = None,
                rel: Optional[torch.Tensor] = None) -> torch.Tensor:
        """query ``[B, Tq, d]``, key ``[B, Tk, d]`` (default: query); ``allowed [B, Tq, Tk]``
        or ``key_mask [B, Tk]`` bool; ``rel [B, Tq, Tk]`` long when the module has relations.
        Returns ``[B, Tq, d]``."""
        key = query if key is None else key
        q, k, v = self.heads(self.q(query)), self.heads(self.k(key)), self.heads(self.v(key))
        dropout = self.dropout if self.training else 0.0
        mask = attention_mask(query.shape[1], allowed, key_mask)
        if self.num_relations:
            if rel is None:
                raise ValueError("this attention has relation tables: pass rel")
            out = relation_attention(q, k, v, mask, rel, self.rk, self.rv, dropout)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.unsqueeze(1), dropout_p=dropout)
        return self.merge(out)

    def key_values(self, key: torch.Tensor, rows: Optional[RealRows] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The projected keys and values ``[B, h, Tk, dh]`` of ``key [B, Tk, d]``, for callers that
        keep them between calls (a decoder's cache: cross-attention keys once per source,
        self-attention keys grown by one position per step); see :meth:`attend`. With ``rows``
        (:class:`RealRows` of ``[B, Tk]``) ``key`` is ``[N, d]``, its real rows: only those are
        projected, and the keys/values are zero at the padding positions."""
        k, v = self.k(key), self.v(key)
        if rows is not None:
            k, v = rows.scatter(k), rows.scatter(v)
        return self.heads(k), self.heads(v)

    def attend(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               mask: Optional[torch.Tensor] = None, rows: Optional[RealRows] = None) -> torch.Tensor:
        """``forward`` over keys/values already projected by :meth:`key_values`: query
        ``[B, Tq, d]``, keys/values ``[B, h, Tk, dh]``; ``mask`` a bool mask broadcastable to
        ``[B, h, Tq, Tk]`` made once by the caller with :func:`attention_mask` (``[B, 1, Tq, Tk]``
        or ``[B, 1, 1, Tk]``), None: every key. No relation tables. Returns ``[B, Tq, d]``; with
        ``rows`` (:class:`RealRows` of ``[B, Tq]``) the query and the result are ``[N, d]``: the
        projections run on the real rows alone, the attention on the ``[B, Tq]`` layout."""
        q = self.q(query)
        q = self.heads(rows.scatter(q) if rows is not None else q)
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=dropout)
        if rows is None:
            return self.merge(out)
        return self.out(rows.gather(out.transpose(1, 2)).flatten(-2))

    def weights(self, query: torch.Tensor, key: Optional[torch.Tensor] = None,
                allowed: Optional[torch.Tensor] = None, key_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The attention probabilities ``softmax(q k^T / sqrt(dh))`` per head: ``[B, h, Tq, Tk]``
        (masked as in ``forward``; no dropout, no relations)."""
        key = query if key is None else key
        q, k = self.heads(self.q(query)), self.heads(self.k(key))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        mask = attention_mask(query.shape[1], allowed, key_mask)
        return scores.masked_fill(~mask.unsqueeze(1), float("-inf")).softmax(-1)

    def mixed(self, query: torch.Tensor, shared_k: Optional[torch.Tensor], shared_v: Optional[torch.Tensor],
              shared_allowed: Optional[torch.Tensor], own_k: Optional[torch.Tensor], own_v: Optional[torch.Tensor],
              own_allowed: Optional[torch.Tensor],
              pairs: Optional[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        """Each query attends to shared keys and to keys of its own, in one softmax.

        query ``[B, n, d]`` (projected here); already projected keys/values: shared
        ``[B, S, h*dh]`` with ``shared_allowed [B, n, S]``, own ``[B, n, K, h*dh]`` with
        ``own_allowed [B, n, K]``; either side may be None. Cost O(n (S + K)). ``pairs``
        ``(index [P], keys [P, h*dh], values [P, h*dh])`` adds ragged keys: key p belongs to
        the query ``index[p]`` of the flattened ``[B * n]``; cost O(P). A query with no
        allowed key gets a zero attention vector (then ``out``). Returns ``[B, n, d]``.
        """
        if shared_k is None and own_k is None and pairs is None:  # nothing to attend to at all
            return self.out(query.new_zeros(query.shape[:2] + (self.num_heads * self.head_dim,)))
        q = self.heads(self.q(query))  # [B, h, n, dh]
        if pairs is not None:
            return self.merge(self._ragged(q, shared_k, shared_v, shared_allowed, own_k, own_v, own_allowed, *pairs))
        scores, allowed = self._column_scores(q, shared_k, shared_allowed, own_k, own_allowed)
        empty = ~allowed.any(-1, keepdim=True)  # nothing to attend to: a zero attention output
        a = scores.masked_fill(~(allowed | empty).unsqueeze(1), float("-inf")).softmax(-1)
        a = a.masked_fill(empty.unsqueeze(1), 0.0)
        if self.training and self.dropout > 0:
            a = F.dropout(a, self.dropout)
        return self.merge(self._column_output(a, shared_k, shared_v, own_v))

    def _column_scores(self, q, shared_k, shared_allowed, own_k, own_allowed):
        """Scaled scores ``[B, h, n, S + K]`` of the shared then own columns and where they are
        allowed ``[B, n, S + K]``; ``(None, None)`` when there are neither."""
        scores, allowed = [], []
        if shared_k is not None:
            scores.append(q @ self.heads(shared_k).transpose(-1, -2))  # [B, h, n, S]
            allowed.append(shared_allowed)
        if own_k is not None:
            scores.append((q.unsqueeze(-2) * self.heads(own_k)).sum(-1))  # [B, h, n, K]
            allowed.append(own_allowed)
        if not scores:
            return None, None
        return torch.cat(scores, -1) / math.sqrt(self.head_dim), torch.cat(allowed, -1)

    def _column_output(self, a, shared_k, shared_v, own_v):
        """Values ``[B, h, n, dh]`` weighted by ``a [B, h, n, S + K]`` over the shared then own columns."""
        out, S = 0, 0
        if shared_k is not None:
            S = shared_k.shape[1]
            out = a[..., :S] @ self.heads(shared_v)
        if own_v is not None:
            out = out + (a[..., S:].unsqueeze(-1) * self.heads(own_v)).sum(-2)
        return out

    def _ragged(self, q, shared_k, shared_v, shared_allowed, own_k, own_v, own_allowed, index, pair_k, pair_v):
        """:meth:`mixed` with ragged keys: one softmax per query over its dense columns and its
        pairs, normalised with scatter ops. q ``[B, h, n, dh]`` -> ``[B, h, n, dh]``."""
        B, h, n, dh = q.shape
        dense, ok = self._column_scores(q, shared_k, shared_allowed, own_k, own_allowed)  # [B, h, n, k], [B, n, k]
        flat_q = q.permute(0, 2, 1, 3).reshape(B * n, h, dh)
        pk, pv = pair_k.view(-1, h, dh), pair_v.view(-1, h, dh)
        pair_s = (flat_q[index] * pk).sum(-1) / math.sqrt(dh)  # [P, h]
        # per-query max (a stabiliser only: no gradient needed) over dense columns and pairs
        top = flat_q.new_full((B * n, h), float("-inf"))
        if dense is not None:
            dense = dense.masked_fill(~ok.unsqueeze(1), float("-inf"))
            top = dense.detach().amax(-1).permute(0, 2, 1).reshape(B * n, h)
        top = top.scatter_reduce(0, index.unsqueeze(1).expand(-1, h), pair_s.detach(), "amax")
        top = top.masked_fill(torch.isinf(top), 0.0)
        pair_e = (pair_s - top[index]).exp()  # [P, h]
        total = torch.zeros_like(top).index_add(0, index, pair_e)  # [B * n, h]
        if dense is not None:
            dense_e = (dense - top.view(B, n, h).permute(0, 2, 1).unsqueeze(-1)).exp()  # [B, h, n, k], 0 where masked
            total = total + dense_e.sum(-1).permute(0, 2, 1).reshape(B * n, h)
        inv = torch.where(total > 0, 1.0 / total.clamp(min=1e-30), torch.zeros_like(total))  # no key: zeros
        pair_a = pair_e * inv[index]
        if self.training and self.dropout > 0:
            pair_a = F.dropout(pair_a, self.dropout)
        out = torch.zeros_like(flat_q).index_add(0, index, pair_a.unsqueeze(-1) * pv)  # [B * n, h, dh]
        out = out.view(B, n, h, dh).permute(0, 2, 1, 3)
        if dense is not None:
            a = dense_e * inv.view(B, n, h).permute(0, 2, 1).unsqueeze(-1)
            if self.training and self.dropout > 0:
                a = F.dropout(a, self.dropout)
            out = out + self._column_output(a, shared_k, shared_v, own_v)
        return out
