"""The translation specs (jsonnet_configs/mt/): each validates (types, registered names, every data
path of the six test sets), and the Transformer and BiG specs differ only in the encoder and the
lattice builder that BiG reads (same decoder, sizes, data, batches and epochs)."""
import pytest
import torch

from multigrain.platform.experiment import validate_spec
from multigrain.platform.specs import load_spec
from multigrain.platform.tracking import flatten
from tests.conftest import ROOT

SPECS = ["tvsub_transformer", "tvsub_big", "tvsub_transformer_small", "tvsub_big_small", "tatoeba_tiny"]


@pytest.mark.parametrize("name", SPECS)
def test_mt_spec_validates(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    validate_spec(load_spec(f"jsonnet_configs/mt/{name}.jsonnet"), name)


@pytest.mark.parametrize("suffix", ["", "_small"])
def test_transformer_and_big_differ_only_in_the_encoder(suffix, monkeypatch):
    monkeypatch.chdir(ROOT)
    transformer, big = (flatten(load_spec(f"jsonnet_configs/mt/tvsub_{e}{suffix}.jsonnet")) for e in ("transformer", "big"))
    differing = {k for k in transformer.keys() | big.keys() if transformer.get(k) != big.get(k)}
    lattice_keys = {k for k in big if k.endswith("lattice_builder.type")}
    assert differing == {"model.encoder.type"} | lattice_keys
    assert len(lattice_keys) == 7  # the training/validation reader and the six test sets' readers
    assert set(k.split(".")[1] for k in transformer if k.startswith("test_sets.")) == \
           {"tvsub", "wmt22", "wmt18", "wmt19", "wmt20", "tatoeba"}
    assert transformer["model.encoder.hidden_size"] == ("512" if suffix == "" else "256")


@pytest.mark.parametrize("name", SPECS)
def test_warm_up_is_a_share_of_the_run_however_it_is_cut(name, monkeypatch):
    """A run cut to one epoch of a slice (the CPU benchmark: 1,250 steps) warms up over the same
    share of its steps as the full run; a fixed 1,000-step warm-up once filled 80 % of it."""
    from multigrain.platform.optim import LinearWarmupDecay

    monkeypatch.chdir(ROOT)
    scheduler = dict(load_spec(f"jsonnet_configs/mt/{name}.jsonnet")["trainer"]["scheduler"])
    assert scheduler.pop("type") == "linear_warmup" and "warmup_steps" not in scheduler
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    for steps in (1_250, 67_110):
        rates = LinearWarmupDecay(optimizer, num_training_steps=steps, **scheduler)
        factors = [rates.factor(step) for step in range(steps)]
        peak = max(range(steps), key=factors.__getitem__)
        assert 0.03 * steps <= peak <= 0.1 * steps
