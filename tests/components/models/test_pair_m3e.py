"""Pairs over the m3e-small backbone (``jsonnet_configs/pair/bq_m3e_*.jsonnet``): the shipped spec's
model and schedule (backbone 1e-4, new layers 1e-3, warm-up) fit 32 BQ pairs to 100%, and a pair
model whose dev predictions all go to one label says so in its epoch line."""
import types

import pytest

from multigrain.components.models.pair_classifier import PairClassifier
from multigrain.platform.epoch_log import epoch_line
from multigrain.platform.specs import load_spec
from multigrain.testing import ModelTestCase
from tests.conftest import DATA, ROOT

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def bq_32(tmp_path_factory):
    """32 BQ training pairs, 16 of each label."""
    lines = (DATA / "bq_corpus" / "train.txt").read_text(encoding="utf-8").splitlines()[:400]
    picked = [x for x in lines if x.endswith("_!_1")][:16] + [x for x in lines if x.endswith("_!_0")][:16]
    path = tmp_path_factory.mktemp("bq") / "pairs32.txt"
    path.write_text("\n".join(picked) + "\n", encoding="utf-8")
    return str(path)


def test_the_m3e_pair_spec_fits_32_pairs(bq_32, tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from multigrain.components.embedders.hf_transformer import resolve_model_path
    from multigrain.platform.errors import ConfigurationError

    try:
        resolve_model_path("package:embedding/m3e-small")
    except ConfigurationError as e:
        pytest.skip(str(e))
    monkeypatch.chdir(ROOT)
    spec = load_spec("jsonnet_configs/pair/bq_m3e_backbone.jsonnet")
    assert spec["trainer"]["optimizer"]["parameter_groups"] == [[["^embedder\\.model\\."], {"lr": 1e-4}]]
    spec.update(train_data_path=bq_32, validation_data_path=bq_32, data_loader={"batch_size": 8})
    spec.pop("test_data_path")
    spec["trainer"]["num_epochs"] = 12
    result = ModelTestCase(spec, tmp_path / "run").check("accuracy", 1.0)
    assert result["validation"]["majority_share"] == 0.5


def hint(pairs, share):
    model = types.SimpleNamespace(labels=["0", "1"], _last_pairs=pairs)
    return PairClassifier.epoch_hint(model, {"validation_majority_share": share})


def test_a_pair_model_at_the_majority_class_says_so_in_its_epoch_line():
    stuck = hint({(0, 0): 69, (1, 0): 31}, 1.0)
    assert "100% of the dev predictions are label '0' (69% of the gold labels)" in stuck
    assert "majority class" in stuck and "parameter_groups" in stuck
    line = epoch_line({"epoch": 1, "train_loss": 0.6, "validation_accuracy": 0.69, "validation_majority_share": 1.0},
                      2, "accuracy", 0.69, 1, 10.0, stuck)
    assert line.endswith("remaining ~10.0s | " + stuck)
    assert hint({(0, 0): 60, (1, 1): 30, (1, 0): 10}, 0.7) is None  # learning: no hint
    assert hint({}, 1.0) is None




def test_the_pair_spec_over_a_tiny_local_bert_fits_32_pairs(bq_32, tmp_path, monkeypatch):
    """The same spec with its backbone swapped for a randomly initialised 2-layer BERT saved to a
    folder (CI has no m3e), its rate raised to the new layers' (nothing pretrained to keep): the
    pair input (segment ids, [SEP], the pooled state) fits 32 pairs to 100%."""
    pytest.importorskip("transformers")
    from tests.conftest import tiny_bert

    chars = {c for line in open(bq_32, encoding="utf-8") for c in "".join(line.split("_!_")[:2])}
    folder = tiny_bert(tmp_path / "bert", chars, hidden=64, positions=128)
    monkeypatch.chdir(ROOT)
    spec = load_spec("jsonnet_configs/pair/bq_m3e_backbone.jsonnet")
    spec["model"]["embedder"]["model_path"] = str(folder)
    spec.update(train_data_path=bq_32, validation_data_path=bq_32, data_loader={"batch_size": 8})
    spec.pop("test_data_path")
    spec["trainer"]["num_epochs"] = 40
    spec["trainer"].pop("patience", None)
    spec["trainer"]["optimizer"]["parameter_groups"][0][1]["lr"] = spec["trainer"]["optimizer"]["lr"]
    result = ModelTestCase(spec, tmp_path / "run").check("accuracy", 1.0)
    assert result["validation"]["majority_share"] == 0.5
