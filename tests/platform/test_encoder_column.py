"""Leaderboard rows always name an encoder: a spec without a separate ``model.encoder`` is tagged
with its backbone/embedder's type, and rows of runs logged before that read it from the flattened
spec in the run's params. The spec hash does not change (the tags are not part of it)."""
import pytest

from multigrain.platform.experiment import identity
from multigrain.platform.leaderboard import rows
from multigrain.platform.specs import load_spec, spec_hash
from tests.conftest import ROOT


@pytest.mark.parametrize("path, encoder", [
    ("jsonnet_configs/cls/chnsenticorp_backbone.jsonnet", "char_transformer"),
    ("jsonnet_configs/cls/chnsenticorp_m3e_backbone.jsonnet", "hf_transformer"),
    ("jsonnet_configs/cls/chnsenticorp_mwa.jsonnet", "mwa"),
    ("jsonnet_configs/ner/resume_bilstm_crf.jsonnet", "bilstm"),
])
def test_shipped_specs_name_an_encoder(path, encoder):
    spec = load_spec(str(ROOT / path))
    assert "encoder" in spec["model"] or spec["model"]["embedder"]["type"] == encoder
    assert identity(spec)["encoder"] == encoder


def test_identity_leaves_the_spec_and_its_hash_alone():
    spec = {"task": "cls", "dataset": "x", "model": {"type": "classifier", "embedder": {"type": "hf_transformer"}}}
    before = spec_hash(spec)
    assert identity(spec) == {"task": "cls", "dataset": "x", "model": "classifier", "encoder": "hf_transformer"}
    assert spec_hash(spec) == before
    assert identity({"model": {"type": "m"}})["encoder"] == ""


def record(run_id, tags, params, value):
    return {"id": run_id, "run_id": run_id, "experiment": "cls/x", "name": run_id, "status": "FINISHED",
            "start_time": 0, "end_time": 0, "tags": {"leaderboard_metric": "test_accuracy", **tags},
            "metrics": {"test_accuracy": value}, "params": params, "history": {}}


def test_rows_of_old_runs_read_the_backbone_from_their_params():
    recs = [record("old", {"encoder": "", "spec_hash": "a"}, {"model.embedder.type": "char_transformer"}, 0.8),
            record("new", {"encoder": "hrmf", "spec_hash": "b"}, {"model.embedder.type": "char_transformer"}, 0.9),
            record("bare", {"spec_hash": "c"}, {}, 0.7)]
    assert [(r["run_id"], r["encoder"]) for r in rows(recs)] == [("new", "hrmf"), ("old", "char_transformer"),
                                                                 ("bare", "")]
