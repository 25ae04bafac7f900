"""Heads whose loss is a mean over units other than instances (tagged positions, windows, target
tokens) return ``loss_count``; with it, replicas of a data-parallel step weighted by
``Replica.loss_weight`` reproduce the one-process gradient of the whole batch exactly.

Oracle: ``torch.autograd.grad`` of the head's loss on the whole batch. The replicas are simulated
(their all-reduce sums the counts the test computes), as DDP's gradient average is a plain mean.
"""
import torch

from multigrain.components.heads.nmt_decoder import NmtDecoder
from multigrain.components.heads.softmax_tagger import SoftmaxTaggerHead
from multigrain.components.heads.span import SpanHead
from multigrain.platform.data_parallel import Replica
from multigrain.testing import SimulatedReplica

WORLD = 2
BATCH = 5  # slices of 2 and 3 items


def replica_gradient(head, batch: dict, loss_of, owner: list[int], counted: bool = True) -> list[torch.Tensor]:
    """The DDP average over WORLD replicas of grad(W * w_r * L_r), each on the rows of ``batch``
    whose instance (``owner[row]``) is in its slice of the BATCH instances; ``counted=False``
    drops ``loss_count`` (weights by instances)."""
    params = [p for p in head.parameters() if p.requires_grad]
    slices = [Replica(r, WORLD, torch.device("cpu"), wrap=None).part(list(range(BATCH))) for r in range(WORLD)]
    rows = [torch.tensor([i for i, o in enumerate(owner) if o in idx]) for idx, _ in slices]
    outputs = [loss_of({k: v[r] for k, v in batch.items()}) for r in rows]
    counts = [float(out["loss_count"]) for out in outputs]
    total = [torch.zeros_like(p) for p in params]
    for r, ((_, share), out) in enumerate(zip(slices, outputs)):
        seen = out if counted else {"loss": out["loss"]}
        weight = SimulatedReplica(r, [[c] for c in counts]).loss_weight(share, seen)
        grads = torch.autograd.grad(out["loss"] * (weight * WORLD), params, allow_unused=True)
        total = [t + (g if g is not None else 0) / WORLD for t, g in zip(total, grads)]
    return total


def assert_exact(head, batch: dict, loss_of, units: int, owner: list[int] = tuple(range(BATCH))):
    params = [p for p in head.parameters() if p.requires_grad]
    full = loss_of(batch)
    assert int(full["loss_count"]) == units
    expected = [g if g is not None else torch.zeros_like(p)
                for g, p in zip(torch.autograd.grad(full["loss"], params, allow_unused=True), params)]
    for got, want in zip(replica_gradient(head, batch, loss_of, list(owner)), expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)
    # weighted by instances instead, the step is another one: the count matters
    by_instances = replica_gradient(head, batch, loss_of, list(owner), counted=False)
    assert not all(torch.allclose(got, want) for got, want in zip(by_instances, expected))


def lengths_mask(lengths: list[int], n: int) -> torch.Tensor:
    return torch.arange(n).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


def test_softmax_tagger_counts_its_tagged_positions():
    torch.manual_seed(0)
    head = SoftmaxTaggerHead(6, ["O", "B-X", "I-X"])
    mask = lengths_mask([7, 1, 2, 6, 3], 7)
    batch = {"states": torch.randn(BATCH, 7, 6), "mask": mask, "tags": torch.randint(0, 3, (BATCH, 7))}
    assert_exact(head, batch, lambda b: head(b["states"], b["mask"], tags=b["tags"]), units=19)


def test_span_head_counts_its_windows():
    """Five questions in eight windows (a long context is cut into several): the loss is a mean
    over windows, so a replica's weight is its share of the windows, not of the questions."""
    torch.manual_seed(1)
    head = SpanHead(6, dropout=0.0)
    owner = [0, 1, 1, 1, 2, 3, 3, 4]
    mask = lengths_mask([9, 4, 6, 9, 5, 8, 9, 7], 9)
    batch = {"states": torch.randn(8, 9, 6), "mask": mask, "context_mask": mask,
             "start": torch.tensor([1, 2, 0, 5, 3, 0, 2, 6]), "end": torch.tensor([3, 2, 0, 8, 4, 0, 7, 6])}
    head.train()
    assert_exact(head, batch, lambda b: head(b["states"], b["mask"], context_mask=b["context_mask"],
                                             start_positions=b["start"], end_positions=b["end"]),
                 units=8, owner=owner)


def test_nmt_decoder_counts_its_target_tokens():
    torch.manual_seed(2)
    head = NmtDecoder(8, 12, num_layers=1, num_heads=2, feedforward_dim=16, dropout=0.0, label_smoothing=0.1)
    target = torch.randint(4, 12, (BATCH, 6))
    lengths = [6, 2, 4, 1, 3]
    target = target.masked_fill(~lengths_mask(lengths, 6), head.pad)
    batch = {"states": torch.randn(BATCH, 4, 8), "source_mask": lengths_mask([4, 4, 2, 3, 1], 4),
             "target_input": torch.cat([torch.full((BATCH, 1), head.bos), target[:, :-1]], 1),
             "target_output": target}
    assert_exact(head, batch, lambda b: head(b["states"], b["source_mask"], b["target_input"], b["target_output"]),
                 units=sum(lengths))
