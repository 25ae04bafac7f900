"""The translation specs (jsonnet_configs/mt/): each validates (types, registered names, every data
path of the six test sets), and the Transformer and BiG specs differ only in the encoder and the
lattice builder that BiG reads (same decoder, sizes, data, batches and epochs)."""
import pytest

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
