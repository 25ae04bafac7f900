"""A run directory is the whole archive: ``evaluate``, ``predict`` and ``load_archive`` build its model
without the files its first weights came from (the ``weight_sources`` of its components: pretrained
vectors, another run's ``archive_path``, a pre-training run) or its vocabulary's (``vocabulary.directory``),
as AllenNLP loads an archive without its ``pretrained_file``. A training reads them: a new spec naming one that is not there is refused at its
spec path before any data is read (exit 2), a resume that misses one names the file."""
import inspect
import json
import shutil
from pathlib import Path

import pytest
import torch

from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.runs import Run
from multigrain.testing import bilstm_tagger, copy_sentences, sentence_model, tiny_spec
from tests.conftest import DATA, run_cli

#: every registered class that reads files for its first weights, and those parameters
WEIGHT_SOURCES = {
    "token_embedder:hf_transformer": ("archive_path",),
    "token_embedder:char_transformer": ("archive_path",),
    "token_embedder:char_bigram": ("char_pretrained_file", "bigram_pretrained_file"),
    "token_embedder:lattice": ("char_pretrained_file", "bigram_pretrained_file", "word_pretrained_file"),
    "token_embedder:backbone_lattice": ("word_pretrained_file",),
    "token_embedder:lattice_tokens": ("pretrained",),
    "encoder:hrmf": ("pretrained_file",),
    "encoder:lattice_bert": ("pretrained",),
    "encoder:char_bert": ("pretrained",),
}


def test_each_weight_source_is_a_parameter_that_may_be_left_out():
    from multigrain.platform.registry import KINDS, load_all

    load_all()
    declared = {}
    for kind, base in KINDS.items():
        for entry in base.registry().values():
            names = getattr(entry.cls, "weight_sources", ())
            params = inspect.signature(entry.cls.__init__).parameters
            for name in names:
                assert name in params and params[name].default is None, (entry.where, name)
            if names and entry.cls.__module__.startswith("multigrain."):  # not a test's own classes
                declared[f"{kind}:{entry.name}"] = names
    assert declared == WEIGHT_SOURCES


def vectors_for(train: str, path, dim: int = 8) -> str:
    """A ``.vec`` file with a vector for every character of ``train``, each unlike the others."""
    chars = sorted({line.split(" ")[0] for line in open(train, encoding="utf-8") if line.strip()})
    rows = [f"{c} " + " ".join(f"{((i + 1) * (j + 3)) % 11 / 10 - 0.5:.2f}" for j in range(dim))
            for i, c in enumerate(chars)]
    path.write_text(f"{len(chars)} {dim}\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return str(path)


def test_a_tagger_evaluates_and_predicts_after_its_vectors_are_gone(tmp_path):
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "train.bmes", 10)
    vec = vectors_for(train, tmp_path / "chars.vec")
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, test=train, task="ner")
    spec["model"]["embedder"]["char_pretrained_file"] = vec
    Run(spec, tmp_path / "run").train()
    recorded = json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]["f1"]
    (tmp_path / "chars.vec").unlink()

    evaluated = run_cli("evaluate", tmp_path / "run", train, "--output-file", tmp_path / "scores.json", "--device",
                        "cpu")
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads((tmp_path / "scores.json").read_text())["f1"] == pytest.approx(recorded, abs=1e-9)
    predicted = run_cli("predict", tmp_path / "run", train, "--output-file", tmp_path / "tags.jsonl", "--device",
                        "cpu")
    assert predicted.returncode == 0, predicted.stderr
    assert len((tmp_path / "tags.jsonl").read_text().splitlines()) == 10


def test_a_missing_weight_file_is_refused_at_its_spec_path(tmp_path):
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "train.bmes", 6)
    vec = vectors_for(train, tmp_path / "chars.vec")
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, task="ner", epochs=2)
    spec["model"]["embedder"]["char_pretrained_file"] = vec
    gone = dict(spec, model=dict(spec["model"], embedder=dict(spec["model"]["embedder"],
                                                               char_pretrained_file=str(tmp_path / "no.vec"))))
    with pytest.raises(SpecError) as caught:
        Run(gone, tmp_path / "fresh")
    assert str(caught.value).splitlines()[1:] == [
        f"  model.embedder.char_pretrained_file: file not found: {tmp_path / 'no.vec'} (paths are relative to "
        f"{Path.cwd()})"]
    spec_file = tmp_path / "gone.json"
    spec_file.write_text(json.dumps(gone), encoding="utf-8")
    cli = run_cli("train", spec_file, "-s", tmp_path / "cli", "--no-tracking")
    assert cli.returncode == 2 and "model.embedder.char_pretrained_file: file not found" in cli.stderr
    assert "Traceback" not in cli.stderr and not (tmp_path / "cli").exists()

    Run(spec, tmp_path / "run").train(stop_after_epoch=1)
    (tmp_path / "chars.vec").unlink()  # a resume builds the model as the training did: it reads the file
    with pytest.raises(ConfigurationError, match=f"model.embedder: CharBigramEmbedder: {vec}: no such file"):
        Run.open(tmp_path / "run").train(resume=True)


def test_a_model_over_another_runs_backbone_loads_without_that_run(tmp_path):
    lines = (DATA / "chnsenticorp" / "train.tsv").read_text(encoding="utf-8").splitlines()[:13]
    (tmp_path / "twelve.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    reader = {"type": "chnsenticorp", "cache_dir": str(tmp_path / "cache")}
    data = str(tmp_path / "twelve.tsv")
    Run(tiny_spec(sentence_model("classifier"), reader, data, seed=3), tmp_path / "source").train()
    model = sentence_model("classifier")
    model["embedder"]["archive_path"] = str(tmp_path / "source")
    spec = tiny_spec(model, reader, data, test=data)
    spec["vocabulary"] = {"directory": str(tmp_path / "source" / "vocabulary")}  # its rows: the source run's
    run = Run(spec, tmp_path / "run")
    run.train()
    shutil.rmtree(tmp_path / "source")

    archive = Run.open(tmp_path / "run").load_archive(device="cpu")
    saved = torch.load(tmp_path / "run" / "best.pt", weights_only=True)
    assert all(torch.equal(value, saved[name]) for name, value in archive.model.state_dict().items())
    scores = Run.open(tmp_path / "run").score(data, device="cpu")
    recorded = json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]["accuracy"]
    assert scores.metrics["accuracy"] == pytest.approx(recorded, abs=1e-9)
