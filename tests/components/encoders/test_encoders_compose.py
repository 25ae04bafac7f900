"""The ``compose`` encoder: dimensions chained from the spec, each encoder fed the previous one's
output with the right mask (characters after a lattice-token encoder), spec errors with their
path, and a BiLSTM -> BiG tagger that overfits 20 sentences."""
import pytest
import torch

from multigrain.platform.config import Lazy, build
from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.kinds import Encoder
from multigrain.testing import ModelTestCase, char_tagger
from tests.conftest import random_lattice_batch

pytestmark = pytest.mark.usefixtures("single_thread")


class Holder:
    """Takes an encoder spec as a model does: validated now, built with its input size later."""

    def __init__(self, encoder: Lazy[Encoder]):
        self.encoder = encoder


def compose(spec: dict, input_dim: int):
    return build(Holder, {"encoder": spec}, "model").encoder.construct(input_dim=input_dim)


def test_dimensions_chain_and_output_equals_the_encoders_in_turn():
    torch.manual_seed(0)
    encoder = compose({"type": "compose", "encoders": [
        {"type": "bilstm", "hidden_size": 6},
        {"type": "big", "hidden_size": 8, "num_layers": 1, "num_heads": 2, "dropout": 0.0, "attention_dropout": 0.0},
    ]}, input_dim=5).eval()
    bilstm, big = encoder.encoders
    assert (bilstm.get_input_dim(), bilstm.get_output_dim(), big.get_input_dim()) == (5, 12, 12)
    assert (encoder.get_input_dim(), encoder.get_output_dim()) == (5, 8)
    lattice = random_lattice_batch(1)
    n = lattice.max_chars
    x = torch.randn(lattice.mask.shape[0], n, 5)
    batch = {"lattice": lattice}
    expected = big(bilstm(x, lattice.char_mask, batch), lattice.char_mask, batch)
    torch.testing.assert_close(encoder(x, lattice.char_mask, batch), expected)


def test_after_lattice_tokens_the_next_encoder_gets_the_character_mask():
    """PLTE reads lattice tokens [B, T, d] and returns characters [B, n, d]: the BiLSTM after it
    must pack by the characters' lengths, not the lattice's."""
    torch.manual_seed(0)
    encoder = compose({"type": "compose", "encoders": [
        {"type": "plte", "hidden_size": 8, "num_layers": 1, "num_heads": 2, "dropout": 0.0},
        {"type": "bilstm", "hidden_size": 3},
    ]}, input_dim=8).eval()
    plte, bilstm = encoder.encoders
    lattice = random_lattice_batch(2)
    x = torch.randn(*lattice.mask.shape, 8)
    batch = {"lattice": lattice}
    chars = plte(x, lattice.mask, batch)
    assert chars.shape[1] == lattice.max_chars < lattice.mask.shape[1]
    expected = bilstm(chars, lattice.char_mask, batch)
    out = encoder(x, lattice.mask, batch)
    torch.testing.assert_close(out, expected)
    assert not out[~lattice.char_mask].any()  # packed by character lengths: zeros past each row's end


def test_spec_errors_name_their_path():
    with pytest.raises(ConfigurationError, match="at least one encoder"):
        compose({"type": "compose", "encoders": []}, input_dim=4)
    with pytest.raises(SpecError) as error:
        compose({"type": "compose", "encoders": [{"type": "bilstm"}, {"type": "bilstmm"}]}, input_dim=4)
    assert "model.encoder.encoders[1].type: unknown encoder type 'bilstmm' (did you mean 'bilstm'?)" in str(error.value)
    with pytest.raises(SpecError, match=r"model.encoder.encoders\[0\].hidden_size: expected int"):
        compose({"type": "compose", "encoders": [{"type": "bilstm", "hidden_size": "8x"}]}, input_dim=4)


def test_bilstm_then_big_overfits_twenty_sentences(tmp_path, tagger_overfit_data):
    encoder = {"type": "compose", "encoders": [
        {"type": "bilstm", "hidden_size": 16},
        {"type": "big", "hidden_size": 32, "num_layers": 1, "num_heads": 4, "dropout": 0.0, "attention_dropout": 0.0},
    ]}
    spec = tagger_overfit_data.spec(char_tagger(encoder), lattice=True, epochs=25)
    ModelTestCase(spec, tmp_path / "run").check("f1", 0.99)
