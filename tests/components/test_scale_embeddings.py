"""``scale_embeddings``: the encoders' input is ``sqrt(d) * proj(x) + P(position)`` (Vaswani et al.
2017, sec. 3.4), off by default so that shipped specs keep their results."""
import math

import torch

from multigrain.components.encoders.big import BigEncoder
from multigrain.components.encoders.transformer import TransformerEncoder
from multigrain.components.nn.char_input import CharInput
from multigrain.components.nn.positions import sinusoidal_positions


def test_the_scaled_input_is_sqrt_d_times_the_embedding_plus_the_sinusoid():
    torch.manual_seed(0)
    d = 16
    layer = CharInput(d, d, dropout=0.0, scale_embeddings=True)
    x = torch.randn(2, 5, d)
    mask = torch.ones(2, 5, dtype=torch.bool)
    out, char_mask = layer(x, mask)
    expected = math.sqrt(d) * x + sinusoidal_positions(torch.arange(5).expand(2, 5), d)
    assert torch.allclose(out, expected, atol=1e-6)
    assert char_mask.equal(mask)


def test_without_the_option_the_input_is_unscaled_and_the_parameters_are_the_same():
    torch.manual_seed(0)
    plain = TransformerEncoder(8, hidden_size=16, num_layers=1, num_heads=2, dropout=0.0)
    torch.manual_seed(0)
    scaled = TransformerEncoder(8, hidden_size=16, num_layers=1, num_heads=2, dropout=0.0, scale_embeddings=True)
    assert plain.state_dict().keys() == scaled.state_dict().keys()
    for key, value in plain.state_dict().items():
        assert torch.equal(value, scaled.state_dict()[key]), key
    x = torch.randn(1, 4, 8)
    mask = torch.ones(1, 4, dtype=torch.bool)
    unscaled, _ = plain.char_input(x, mask)
    with_scale, _ = scaled.char_input(x, mask)
    positions = sinusoidal_positions(torch.arange(4).expand(1, 4), 16)
    assert torch.allclose(with_scale - positions, 4.0 * (unscaled - positions), atol=1e-5)


def test_big_takes_the_option_to_its_character_input():
    enc = BigEncoder(16, hidden_size=16, num_layers=1, num_heads=2, local="none", scale_embeddings=True)
    assert enc.char_input.scale == 4.0
    assert BigEncoder(16, hidden_size=16, num_layers=1, num_heads=2, local="none").char_input.scale == 1.0


def test_an_unscaled_char_bigram_sized_embedding_is_mostly_position():
    """The imbalance the option fixes: a row of variance 1/d per component (``char_bigram``'s
    initialisation) has norm ~1 against sqrt(d/2) for a sinusoidal position vector."""
    d = 256
    torch.manual_seed(0)
    table = torch.empty(1000, d).uniform_(-(3.0 / d) ** 0.5, (3.0 / d) ** 0.5)
    token_norm = table.norm(dim=-1).mean().item()
    position_norm = sinusoidal_positions(torch.arange(50), d).norm(dim=-1).mean().item()
    assert abs(token_norm - 1.0) < 0.05
    assert abs(position_norm - math.sqrt(d / 2)) < 1e-3
    assert abs(math.sqrt(d) * token_norm / position_norm - math.sqrt(2)) < 0.1
