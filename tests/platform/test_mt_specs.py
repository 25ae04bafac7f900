"""The translation specs (jsonnet_configs/mt/): each validates (types, registered names, every data
path of the six test sets), and the Transformer and BiG specs differ only in the encoder and the
lattice builder that BiG reads (same decoder, sizes, data, batches and epochs). Issue 40's recipe
specs (``*_small_cpu``, ``*_small_gpu``) are pre-norm with an inverse-sqrt schedule warmed up in
steps; the older specs keep none of it (their hashes are pinned in test_spec_hashes)."""
import pytest
import torch

from multigrain.platform.experiment import validate_spec
from multigrain.platform.specs import load_spec
from multigrain.platform.tracking import flatten
from tests.conftest import ROOT

SPECS = ["tvsub_transformer", "tvsub_big", "tvsub_transformer_small", "tvsub_big_small", "tatoeba_tiny"]
RECIPE_SPECS = [f"tvsub_{e}_small_{v}" for v in ("cpu", "gpu") for e in ("transformer", "big")]


@pytest.mark.parametrize("name", SPECS + RECIPE_SPECS)
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


@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_recipe_specs_differ_only_in_the_encoder_and_are_pre_norm_with_steps_of_warm_up(variant, monkeypatch):
    from multigrain.platform.optim import InverseSqrt

    monkeypatch.chdir(ROOT)
    transformer, big = (load_spec(f"jsonnet_configs/mt/tvsub_{e}_small_{variant}.jsonnet")
                        for e in ("transformer", "big"))
    flat_t, flat_b = flatten(transformer), flatten(big)
    differing = {k for k in flat_t.keys() | flat_b.keys() if flat_t.get(k) != flat_b.get(k)}
    assert differing == {"model.encoder.type"} | {k for k in flat_b if k.endswith("lattice_builder.type")}
    for spec in (transformer, big):
        model, trainer = spec["model"], spec["trainer"]
        assert model["encoder"]["pre_norm"] is True and model["decoder"]["pre_norm"] is True
        assert model["encoder"]["dropout"] == model["decoder"]["dropout"] == 0.0
        assert trainer["scheduler"]["type"] == "inverse_sqrt" and trainer["scheduler"]["warmup_steps"] >= 100
        assert InverseSqrt.uses_num_training_steps is False  # the warm-up is the same in a cut or extended run
    if variant == "cpu":  # 2 x 180,000 pairs in length-bucketed token batches: about 40 minutes of one core
        assert transformer["dataset_reader"]["max_instances"] * transformer["trainer"]["num_epochs"] == 360_000
        assert transformer["data_loader"]["max_tokens"] == 1536
        assert set(transformer["test_sets"]) == {"tvsub", "wmt22"}
    else:  # every pair, token batches, bf16 where a GPU has it
        assert "max_instances" not in transformer["dataset_reader"]
        assert transformer["data_loader"]["max_tokens"] == 8192
        assert transformer["trainer"]["mixed_precision"] == "auto"
    # the decoder on its real target rows: on the GPU recipe only (the CPU rows were trained without it)
    assert transformer["model"]["decoder"].get("pack_targets", False) is (variant == "gpu")


@pytest.mark.parametrize("name", SPECS)
def test_the_older_specs_have_none_of_the_recipe(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    flat = flatten(load_spec(f"jsonnet_configs/mt/{name}.jsonnet"))
    assert not any(k.endswith("pre_norm") or k.endswith("max_tokens") or k.endswith("pack_targets") for k in flat)
