"""An evaluation reader that gives the model other fields than the training reader (the MWA
classifier reads the segmenters' words; a validation or test reader without the segmenters has
none) is refused before the first epoch, naming the reader's spec path, with exit 2 and no run
directory: it used to fail at the first validation (after an epoch) or at the final test."""
import json
from pathlib import Path

import pytest
import torch

from multigrain.platform.evaluation import check_model_reads
from tests.conftest import ROOT, run_cli

FIXTURE = ROOT / "tests" / "fixtures" / "archives_v0"


def mwa_spec(tmp_path: Path, **readers) -> Path:
    spec = json.loads((FIXTURE / "mwa" / "config.json").read_text(encoding="utf-8"))
    data = str(FIXTURE / "data" / "senti_tiny.tsv")
    spec.update({"train_data_path": data, "validation_data_path": data, **readers})
    path = tmp_path / "mwa.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize("key,extra", [
    ("validation_dataset_reader", {}),
    ("test_dataset_reader", {"evaluate_on_test": True, "test_data_path": str(FIXTURE / "data" / "senti_tiny.tsv")}),
])
def test_an_evaluation_reader_without_the_segmenters_is_refused_before_training(tmp_path, key, extra):
    spec = mwa_spec(tmp_path, **{key: {"type": "chnsenticorp"}}, **extra)
    out = run_cli("train", spec, "-s", tmp_path / "run", "--no-tracking", timeout=300)
    assert out.returncode == 2, out.stderr
    assert f"{key}: the model cannot evaluate this reader's first examples" in out.stderr, out.stderr
    assert "they hold the fields chars, label, text" in out.stderr and "Traceback" not in out.stderr
    assert "epoch 1" not in out.stdout + out.stderr  # refused before training, not at validation
    assert not (tmp_path / "run").exists()


def test_the_same_spec_with_the_segmenters_on_every_reader_trains(tmp_path):
    spec = json.loads(mwa_spec(tmp_path).read_text(encoding="utf-8"))
    spec["validation_dataset_reader"] = spec["dataset_reader"]
    (tmp_path / "mwa.json").write_text(json.dumps(spec), encoding="utf-8")
    out = run_cli("train", tmp_path / "mwa.json", "-s", tmp_path / "run", "--no-tracking",
                  timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["finished"] is True


class Drawing(torch.nn.Module):
    """A model whose forward draws random numbers and counts what it saw."""

    def __init__(self):
        super().__init__()
        self.seen = 0

    def tensorize(self, instances):
        return {"x": torch.tensor([float(i["x"]) for i in instances])}

    def instance_length(self, instance):
        return 1

    def forward(self, x):
        self.seen += len(x)
        return {"draw": torch.rand(3) + x.sum()}

    def get_metrics(self, reset=False):
        seen = self.seen
        if reset:
            self.seen = 0
        return {"seen": seen}


def test_the_check_leaves_random_states_mode_and_metrics_as_they_were():
    import random

    model = Drawing()
    model.train()
    model.seen = 5  # a count before the check is dropped, as the training's first reset would
    torch.manual_seed(1)
    random.seed(1)
    before = torch.get_rng_state(), random.getstate()
    check_model_reads(model, {"validation_dataset_reader": [{"x": 1}, {"x": 2}, {"x": 3}], "test_dataset_reader": []})
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]
    assert model.training and model.get_metrics() == {"seen": 0}

    with pytest.raises(Exception) as refused:
        check_model_reads(model, {"test_sets.wmt22": [{"y": 1}]})
    assert "test_sets.wmt22: the model cannot evaluate this reader's first examples (KeyError: 'x')" in str(refused.value)
    assert "they hold the fields y" in str(refused.value)
    assert torch.equal(torch.get_rng_state(), before[0]) and model.training
