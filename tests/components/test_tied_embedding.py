"""The tied table's single-gradient lookup and projection (components/nn/tied_embedding.py) against
the same computation through ``weight[ids]`` and ``h @ weight.T`` and autograd's own sum."""
import pytest
import torch

from multigrain.components.nn.tied_embedding import TiedGradient, tied_lookup, tied_projection

V, D = 11, 6
IDS = torch.tensor([3, 5, 3, 0, 10, 3, 5])  # repeated ids: their rows are added into one gradient row


def graph(weight: torch.Tensor, tied: bool, layer: torch.nn.Linear, ids=IDS):
    """lookup -> a layer -> projection -> a loss that weighs every logit differently."""
    slot = TiedGradient()
    x = tied_lookup(weight, ids, slot) if tied else weight[ids]
    h = torch.tanh(layer(x))
    logits = tied_projection(h, weight, slot) if tied else h @ weight.T
    return (logits * torch.linspace(-1, 2, logits.numel()).view_as(logits)).sum(), slot


def gradients(tied: bool, steps: int = 1):
    torch.manual_seed(0)
    weight = torch.randn(V, D, requires_grad=True)
    layer = torch.nn.Linear(D, D)
    slot = None
    for _ in range(steps):  # no zero_grad between steps: .grad accumulates
        loss, slot = graph(weight, tied, layer)
        loss.backward()
    return loss.detach(), weight.grad, [p.grad for p in layer.parameters()], slot


@pytest.mark.parametrize("steps", [1, 2])
def test_the_table_gets_the_sum_of_the_lookups_and_the_projections_gradients(steps):
    loss, weight_grad, layer_grads, slot = gradients(tied=True, steps=steps)
    plain_loss, plain_weight_grad, plain_layer_grads, _ = gradients(tied=False, steps=steps)
    assert torch.equal(loss, plain_loss)
    torch.testing.assert_close(weight_grad, plain_weight_grad, rtol=1e-6, atol=1e-6)
    for a, b in zip(layer_grads, plain_layer_grads):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert slot.grad is None  # the slot lets go of the gradient it passed on
    # rows no id looked up get the projection's gradient alone; a row looked up 3 times gets 3 rows added
    assert weight_grad[1].abs().sum() > 0 and not torch.equal(weight_grad[3], torch.zeros(D))


def test_the_lookup_alone_makes_its_own_gradient():
    weight = torch.randn(V, D, requires_grad=True)
    (tied_lookup(weight, IDS, TiedGradient()) * torch.arange(D)).sum().backward()
    expected = torch.zeros(V, D)
    for i in IDS.tolist():
        expected[i] += torch.arange(D, dtype=torch.float32)
    assert torch.equal(weight.grad, expected)


def test_under_autocast_the_projection_computes_in_bf16_and_the_gradient_comes_back_in_float32():
    torch.manual_seed(0)
    weight = torch.randn(V, D, requires_grad=True)
    layer = torch.nn.Linear(D, D)
    grads = []
    for tied in (True, False):
        weight.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            slot = TiedGradient()
            x = tied_lookup(weight, IDS, slot) if tied else weight[IDS]
            h = layer(x)
            logits = tied_projection(h, weight, slot) if tied else h @ weight.T
        assert logits.dtype == torch.bfloat16
        logits.float().square().sum().backward()
        assert weight.grad.dtype == torch.float32
        grads.append(weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], rtol=2e-2, atol=2e-2)
