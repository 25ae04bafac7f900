"""``hf_transformer``'s ``archive_path`` (intermediate-task training): the backbone of another run's
``best.pt`` (``embedder.model.*`` or ``embedder.backbone.model.*``; a run directory or the file)
replaces the pretrained weights, every one of them, and nothing of the run's other layers; what is
not such a run is one error naming the file."""
import pytest
import torch
from transformers import BertModel

from multigrain.components.embedders.hf_transformer import HfTransformer
from multigrain.platform.errors import ConfigurationError
from tests.conftest import tiny_bert

TEXT = "我在北京大学读书今年二十岁他住在上海市浦东新区"


def moved_backbone(source: str) -> dict:
    """The source model's weights, each moved away from the source's own."""
    torch.manual_seed(1)
    state = BertModel.from_pretrained(source).state_dict()
    return {k: v + torch.randn_like(v) * 0.01 if v.is_floating_point() else v for k, v in state.items()}


@pytest.mark.parametrize("prefix", ["embedder.model.", "embedder.backbone.model."])
def test_the_runs_backbone_replaces_the_pretrained_weights(tmp_path, prefix):
    source = tiny_bert(tmp_path / "tiny", TEXT)
    trained = moved_backbone(source)
    run = tmp_path / "run"
    run.mkdir()
    head = {"head.projection.weight": torch.ones(3, 32), "encoder.layers.0.weight": torch.ones(4)}
    torch.save({**{prefix + k: v for k, v in trained.items()}, **head}, run / "best.pt")
    for archive in (run, run / "best.pt"):
        embedder = HfTransformer(source, special_tokens=True, archive_path=str(archive))
        loaded = embedder.model.state_dict()
        assert loaded.keys() == trained.keys() and all(torch.equal(loaded[k], trained[k]) for k in loaded)
    plain = HfTransformer(source, special_tokens=True).model.state_dict()
    assert not torch.equal(plain["embeddings.word_embeddings.weight"], trained["embeddings.word_embeddings.weight"])


def test_what_is_not_a_run_of_this_backbone_is_one_error_naming_the_file(tmp_path):
    source = tiny_bert(tmp_path / "tiny", TEXT)
    empty = tmp_path / "empty"
    empty.mkdir()
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    lstm = tmp_path / "lstm.pt"
    torch.save({"embedder.chars.weight": torch.ones(3, 4), "head.crf.transitions": torch.ones(3, 3)}, lstm)
    bigger = tiny_bert(tmp_path / "bigger", TEXT, hidden=48)
    other = tmp_path / "other.pt"
    torch.save({f"embedder.model.{k}": v for k, v in BertModel.from_pretrained(bigger).state_dict().items()}, other)
    partial = tmp_path / "partial.pt"
    state = moved_backbone(source)
    state.pop("encoder.layer.1.output.dense.weight")
    torch.save({f"embedder.model.{k}": v for k, v in state.items()}, partial)
    cases = [(empty, f"archive_path: {empty} is a folder with no best.pt (give a weights file, or a run directory"),
             (tmp_path / "none.pt", f"archive_path: file not found: {tmp_path / 'none.pt'} (paths are relative to"),
             (garbage, f"archive_path: {garbage}: not a multigrain checkpoint, or damaged"),
             (lstm, f"archive_path: {lstm}: holds no backbone weights"),
             (other, f"archive_path: {other}: its backbone does not fit this one: embeddings.word_embeddings.weight "
                     f"has shape"),
             (partial, f"archive_path: {partial}: its backbone does not fit this one: "
                       f"encoder.layer.1.output.dense.weight is missing from the file")]
    for archive, message in cases:
        with pytest.raises(ConfigurationError) as raised:
            HfTransformer(source, special_tokens=True, archive_path=str(archive))
        assert str(raised.value).startswith(message), str(raised.value)
