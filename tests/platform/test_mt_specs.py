"""The translation specs (jsonnet_configs/mt/): each validates (types, registered names, every data
path of the six test sets), and the Transformer and BiG specs differ only in the encoder and the
lattice builder that BiG reads (same decoder, sizes, data, batches and epochs)."""
import pytest

from multigrain.platform.experiment import validate_spec
from multigrain.platform.specs import load_spec
from multigrain.platform.tracking import flatten
from tests.conftest import ROOT

SPECS = [("mt/tvsub_transformer.jsonnet", {"size": "small"}), ("mt/tvsub_transformer.jsonnet", {"size": "base"}),
         ("mt/tvsub_big.jsonnet", {"size": "small"}), ("mt/tvsub_big.jsonnet", {"size": "base"}),
         ("mt/tatoeba_tiny.jsonnet", {})]


@pytest.mark.parametrize("name, ext_vars", SPECS)
def test_mt_spec_validates(name, ext_vars, monkeypatch):
    monkeypatch.chdir(ROOT)
    validate_spec(load_spec(f"jsonnet_configs/{name}", [], ext_vars), name)


@pytest.mark.parametrize("size", ["small", "base"])
def test_transformer_and_big_differ_only_in_the_encoder(size, monkeypatch):
    monkeypatch.chdir(ROOT)
    transformer, big = (flatten(load_spec(f"jsonnet_configs/mt/tvsub_{e}.jsonnet", [], {"size": size}))
                        for e in ("transformer", "big"))
    differing = {k for k in transformer.keys() | big.keys() if transformer.get(k) != big.get(k)}
    lattice_keys = {k for k in big if k.endswith("lattice_builder.type")}
    assert differing == {"model.encoder.type"} | lattice_keys
    assert len(lattice_keys) == 7  # the training/validation reader and the six test sets' readers
    assert set(k.split(".")[1] for k in transformer if k.startswith("test_sets.")) == \
           {"tvsub", "wmt22", "wmt18", "wmt19", "wmt20", "tatoeba"}
