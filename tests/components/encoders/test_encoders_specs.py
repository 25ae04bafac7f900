"""Every NER spec validates, builds its model from a few real sentences of its data set, and
takes one training step with a finite loss."""
from pathlib import Path

import pytest
import torch

from multigrain.platform.specs import load_spec
from multigrain.platform.experiment import validate_spec
from multigrain.testing import model_of_spec, reads_msra_run, use_local_backbone

ROOT = Path(__file__).resolve().parents[3]
SPECS = sorted((ROOT / "jsonnet_configs" / "ner").glob("*.jsonnet"))
pytestmark = pytest.mark.usefixtures("single_thread")


def test_every_dataset_has_every_model():
    stems = {p.stem for p in SPECS}
    for dataset in ("resume", "weibo", "msra"):
        for model in ("bilstm_crf", "transformer", "star", "lattice_lstm", "plte", "plte_sgd", "big"):
            assert f"{dataset}_{model}" in stems
        for model in ("bilstm_crf", "lattice_lstm", "plte", "plte_sgd", "big", "bilstm_big"):
            assert f"{dataset}_{model}_vec" in stems


def write_tiny_vectors(directory: Path, dim: int = 50) -> None:
    """chars.vec, bigrams.vec, words.vec with a few common tokens, as the ``*_vec`` specs expect."""
    directory.mkdir(parents=True, exist_ok=True)
    tokens = {"chars": ["的", "中", "国", "人"], "bigrams": ["中国", "国人", "人的"], "words": ["中国", "中国人"]}
    for namespace, toks in tokens.items():
        rows = [f"{t} " + " ".join(["0.1"] * dim) for t in toks]
        (directory / f"{namespace}.vec").write_text(f"{len(toks)} {dim}\n" + "\n".join(rows) + "\n", encoding="utf-8")


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_spec_builds_and_trains_one_step(path, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # data paths are relative to the repository root
    monkeypatch.setenv("MULTIGRAIN_CACHE", str(tmp_path))
    ext_vars = None
    if path.stem.endswith("_vec"):
        write_tiny_vectors(tmp_path / "vectors")
        ext_vars = {"vectors": str(tmp_path / "vectors")}
    if reads_msra_run(path.stem):  # the MSRA run whose backbone it starts from: its best.pt written below
        ext_vars = {"msra_run": str(tmp_path / "msra")}
        (tmp_path / "msra").mkdir()
        (tmp_path / "msra" / "best.pt").touch()  # there for validation; its tensors once the backbone exists
    spec = load_spec(str(path), ext_vars=ext_vars)
    validate_spec(spec, str(path))
    backbone = tmp_path / "backbone"
    if use_local_backbone(spec, backbone):  # CI installs no m3e: a tiny BERT of the same kind stands in
        from tests.conftest import tiny_bert
        tiny_bert(backbone, "".join(chr(c) for c in range(0x4E00, 0x4E00 + 3000)) + "0123456789")
    if reads_msra_run(path.stem):
        from transformers import BertModel

        tuned = {f"embedder.model.{k}": v + 0.5 for k, v in BertModel.from_pretrained(backbone).state_dict().items()}
        torch.save(tuned, tmp_path / "msra" / "best.pt")
    exp, train, vocab, model = model_of_spec(spec, 6)
    if reads_msra_run(path.stem):  # the run's backbone, not m3e-small's (here: the tiny BERT's)
        backbone_model = model.embedder.backbone.model if hasattr(model.embedder, "backbone") else model.embedder.model
        assert torch.equal(backbone_model.embeddings.word_embeddings.weight,
                           tuned["embedder.model.embeddings.word_embeddings.weight"])
    elif ext_vars:  # the pretrained rows were loaded for the vector file's characters in the vocabulary
        chars = vocab.tokens("chars")
        rows = [model.embedder.chars.weight[chars.index(c)] for c in "的中国人" if c in chars]
        assert rows and all(torch.allclose(r, torch.full_like(r, 0.1)) for r in rows)
    lattice = spec["dataset_reader"].get("lattice_builder")
    assert (train[0].get("lattice") is not None) == (lattice is not None)
    out = model(**model.tensorize(train))
    assert torch.isfinite(out["loss"]) and out["loss"] > 0
    out["loss"].backward()
    trained = [p for p in model.parameters() if p.requires_grad]
    assert all(p.grad is not None for p in trained if p.dim() > 1 and p.shape[0] > 2)
