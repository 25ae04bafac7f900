"""Archives saved before the shared layers of ``components/nn`` (tests/fixtures/archives_v0,
made by its ``make.py``) load with today's code, every tensor of ``best.pt`` finding its
parameter, and give the predictions and outputs they gave when they were saved."""
import json

import pytest
import torch

from multigrain.platform.runs import Run
from multigrain.platform.devices import move_to
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "archives_v0"
#: a name each archive's best.pt has that today's parameters do not
OLD_NAME = {"big": "encoder.projection.weight", "plte": "encoder.positions.table.weight",
            "mwa": "encoder.query.weight", "hrmf": "encoder.unmasked.query.weight"}


def assert_same_predictions(got, want, where=""):
    """Equal labels, tags and texts; floats (probabilities) equal to 1e-5."""
    if isinstance(want, dict):
        assert set(got) == set(want), where
        for key in want:
            assert_same_predictions(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_predictions(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, abs=1e-5), where
    else:
        assert got == want, where


@pytest.mark.parametrize("name", ["big", "plte", "mwa", "hrmf"])
def test_v0_archive_loads_and_predicts_as_saved(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the specs name their lexicon relative to the repository root
    run_dir = FIXTURES / name
    saved = json.loads((run_dir / "predictions.json").read_text(encoding="utf-8"))
    archive = Run.open(run_dir).load_archive(device="cpu")

    state = torch.load(run_dir / "best.pt", map_location="cpu", weights_only=True)
    assert OLD_NAME[name] in state and OLD_NAME[name] not in archive.model.state_dict()
    result = archive.model.load_state_dict(state, strict=True)
    assert not result.missing_keys and not result.unexpected_keys

    instances = archive.reader.annotate([archive.model.text_to_instance({"text": t}) for t in saved["inputs"]])
    assert_same_predictions(list(archive.predict_batches(instances)), saved["predictions"])
    with torch.no_grad():
        output = archive.model(**move_to(archive.model.tensorize(instances), archive.device))
    assert set(saved["outputs"]) <= set(output)
    for key, want in saved["outputs"].items():
        torch.testing.assert_close(output[key], torch.tensor(want), atol=1e-5, rtol=1e-5, msg=key)


def test_char_transformer_warm_starts_from_a_v0_archive(monkeypatch):
    """``archive_path`` reads a backbone saved under the old layer names (a fused ``qkv``)."""
    import warnings

    from multigrain.components.encoders.char_transformer import CharTransformer

    monkeypatch.chdir(ROOT)
    archive = Run.open(FIXTURES / "mwa").load_archive(device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a tensor not loaded would be a warning
        backbone = CharTransformer(archive.vocab, hidden_size=16, num_layers=1, num_heads=2, max_length=64,
                                   archive_path=str(FIXTURES / "mwa")).eval()
    ids = torch.tensor([[2, 5, 9, 14, 3], [2, 7, 3, 0, 0]])
    mask = ids != 0
    torch.testing.assert_close(backbone(ids, mask), archive.model.embedder(ids, mask))


def test_a_damaged_vocabulary_beside_an_archive_path_names_the_file(tmp_path, monkeypatch):
    """The archive's ``vocabulary.json`` maps its token rows onto ours: a damaged one is one error
    naming ``archive_path`` and the file (``Vocabulary.load``'s check), never a traceback."""
    import shutil

    from multigrain.components.encoders.char_transformer import CharTransformer
    from multigrain.platform.errors import ConfigurationError

    monkeypatch.chdir(ROOT)
    archive = Run.open(FIXTURES / "mwa").load_archive(device="cpu")
    copy = tmp_path / "mwa"
    shutil.copytree(FIXTURES / "mwa", copy)
    saved = copy / "vocabulary" / "vocabulary.json"
    saved.write_text(json.dumps({"chars": ["@@PAD@@", 7]}), encoding="utf-8")
    with pytest.raises(ConfigurationError, match=rf"^archive_path: {saved}: damaged vocabulary \(namespace 'chars': "
                                                 r"token 1 is 7, not a string\)$"):
        CharTransformer(archive.vocab, hidden_size=16, num_layers=1, num_heads=2, max_length=64,
                        archive_path=str(copy))
