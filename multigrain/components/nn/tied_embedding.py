"""A tied embedding table ``E [V, d]`` used twice in one graph, as the input lookup and the output
projection (Press & Wolf 2017), with one ``[V, d]`` gradient instead of three.

Through ``nn.Embedding`` and ``x @ E^T`` the backward pass makes the projection's gradient
``g^T x`` ``[V, d]``, the lookup's gradient as a zero ``[V, d]`` table with its rows added, and
their sum: two more passes over the whole table per step (on the small translator's 6,878 x 256
table, 9 % of a training step's CPU time, more than the lookup itself). Here the projection's
backward keeps its ``[V, d]`` gradient in a shared :class:`TiedGradient`, and the lookup's backward,
which autograd runs later (the lookup feeds the projection's input), adds its ``[n, d]`` rows into
that tensor in place (``index_add_``) and hands autograd no gradient of its own, so the
parameter receives the sum once. The same gradient as the two-table computation up to the order
of float additions (a token's rows are added to the projection's value one by one instead of
being summed first), tested against it.

Use both functions on the same table in the same forward, the lookup first::

    slot = TiedGradient()
    x = tied_lookup(E, ids, slot)           # [n, d]
    ...                                     # layers
    logits = tied_projection(h, E, slot)    # [m, V]

Under autocast the projection runs in the autocast dtype as ``x @ E^T`` would, and its gradient
for ``E`` comes back in ``E``'s dtype.
"""
from __future__ import annotations

from typing import Optional

import torch


class TiedGradient:
    """Where the projection's backward leaves its ``[V, d]`` gradient for the lookup's backward."""

    grad: Optional[torch.Tensor] = None


class _TiedProjection(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, slot: TiedGradient) -> torch.Tensor:
        dtype = torch.get_autocast_dtype(h.device.type) if torch.is_autocast_enabled(h.device.type) else h.dtype
        ctx.save_for_backward(h, weight)
        ctx.slot, ctx.dtype = slot, dtype
        with torch.autocast(h.device.type, enabled=False):
            return h.to(dtype) @ weight.to(dtype).T

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        h, weight = ctx.saved_tensors
        grad = grad.to(ctx.dtype)
        grad_h = (grad @ weight.to(ctx.dtype)).to(h.dtype) if ctx.needs_input_grad[0] else None
        grad_weight = (grad.T @ h.to(ctx.dtype)).to(weight.dtype)
        ctx.slot.grad = grad_weight
        return grad_h, grad_weight, None


class _TiedLookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight: torch.Tensor, ids: torch.Tensor, slot: TiedGradient) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.slot, ctx.shape = slot, weight.shape
        return weight.index_select(0, ids)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (ids,) = ctx.saved_tensors
        target, ctx.slot.grad = ctx.slot.grad, None  # drop the slot's reference: autograd may then reuse the tensor
        if target is None:  # no projection in this backward pass: a gradient of our own
            return grad.new_zeros(ctx.shape).index_add_(0, ids, grad), None, None
        target.index_add_(0, ids, grad.to(target.dtype))
        return None, None, None


def tied_lookup(weight: torch.Tensor, ids: torch.Tensor, slot: TiedGradient) -> torch.Tensor:
    """``weight[ids]``: ``[V, d]``, ``[n]`` -> ``[n, d]``."""
    return _TiedLookup.apply(weight, ids, slot)


def tied_projection(h: torch.Tensor, weight: torch.Tensor, slot: TiedGradient) -> torch.Tensor:
    """``h @ weight^T``: ``[m, d]`` -> ``[m, V]``."""
    return _TiedProjection.apply(h, weight, slot)
