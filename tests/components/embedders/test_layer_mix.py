"""``hf_transformer``'s ``layer_mix``: ELMo's scalar mix of every layer, checked against the formula."""
import torch

from multigrain.components.embedders.hf_transformer import HfTransformer
from multigrain.components.nn.scalar_mix import ScalarMix
from tests.conftest import tiny_bert


def test_scalar_mix_equals_gamma_times_the_softmax_weighted_sum():
    torch.manual_seed(0)
    layers = [torch.randn(2, 5, 4) for _ in range(3)]
    mix = ScalarMix(3)
    assert torch.allclose(mix(layers), sum(layers) / 3, atol=1e-6)  # starts at the layers' mean
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.5, -1.0, 2.0]))
        mix.gamma.fill_(1.7)
    e = torch.exp(torch.tensor([0.5, -1.0, 2.0]))
    want = 1.7 * sum(w * h for w, h in zip(e / e.sum(), layers))
    assert torch.allclose(mix(layers), want, atol=1e-6)


def test_layer_mix_mixes_the_embeddings_and_every_layer_and_learns_its_weights(tmp_path):
    path = tiny_bert(tmp_path / "bert", "好书坏")
    embedder = HfTransformer(path, special_tokens=True, layer_mix=True).eval()
    plain = HfTransformer(path, special_tokens=True).eval()
    ids = torch.tensor([embedder.index(["好", "书", "坏"]), embedder.index(["书", "好", "[PAD]"])])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    with torch.no_grad():
        embedder.layer_mix.weights.copy_(torch.tensor([0.3, -0.2, 1.1]))
    got = embedder(ids, mask)
    full, full_mask = plain.with_special_tokens(ids, mask)
    hidden = plain.model(input_ids=full, attention_mask=full_mask.long(), output_hidden_states=True).hidden_states
    assert len(hidden) == 3  # the embeddings and 2 layers
    w = torch.softmax(torch.tensor([0.3, -0.2, 1.1]), 0)
    want = sum(wi * h for wi, h in zip(w, hidden))[:, 1:4]
    assert torch.allclose(got[mask], want[mask], atol=1e-5)
    assert torch.allclose(plain(ids, mask)[mask], hidden[-1][:, 1:4][mask], atol=1e-5)
    got.sum().backward()
    assert embedder.layer_mix.weights.grad is not None and embedder.layer_mix.weights.grad.abs().sum() > 0
