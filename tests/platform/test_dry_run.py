"""``multigrain train SPEC --dry-run`` (AllenNLP's ``train --dry-run``): the data read, the vocabulary
and model built and every check a training makes before its first file, then a report, with nothing
written. The report's figures are checked against a real training of the same spec (its vocabulary
and weights files), and an error a training would stop on stops the dry run the same way."""
from __future__ import annotations

import json
import math
import re
import tempfile

import pytest
import torch

from multigrain.platform.commands import main
from multigrain.platform.vocab import Vocabulary
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_spec(folder, spec: dict) -> str:
    path = folder / "spec.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return str(path)


def files_under(folder) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.fixture
def tagger_spec(tmp_path):
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "train.bmes", 13)
    dev = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "dev.bmes", 20, start=13)
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, dev, task="ner", batch_size=4,
                     epochs=3, scheduler={"type": "linear_warmup", "warmup_steps": 5})
    spec["trainer"]["optimizer"]["parameter_groups"] = [[["^encoder\\."], {"lr": 0.002}]]
    return spec


def test_the_report_matches_what_the_training_then_builds_and_nothing_is_written(tmp_path, tagger_spec, capsys,
                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_spec(tmp_path, tagger_spec)
    before = files_under(tmp_path)
    code, out, err = cli(capsys, "train", path, "-s", tmp_path / "run", "--dry-run")
    assert code == 0, err
    assert files_under(tmp_path) == before  # no run directory, no mlruns.db
    lines = out.splitlines()
    assert re.fullmatch(rf"{re.escape(path)}: dry run, spec hash [0-9a-f]{{64}}; nothing was written \(the training "
                        rf"would write {re.escape(str(tmp_path / 'run'))}\)", lines[0]), lines[0]
    assert lines[1] == "  examples: train 13, validation 7, test 0"

    code, _, err = cli(capsys, "train", path, "-s", tmp_path / "run", "--no-tracking")
    assert code == 0, err
    vocab = Vocabulary.load(tmp_path / "run" / "vocabulary")
    assert lines[2] == "  vocabulary: " + ", ".join(f"{ns} {vocab.size(ns):,}" for ns in vocab.namespaces())
    weights = torch.load(tmp_path / "run" / "best.pt", weights_only=True)
    weights = weights.get("model", weights)
    total = sum(t.numel() for t in weights.values() if t.is_floating_point())
    encoder = sum(t.numel() for name, t in weights.items() if name.startswith("encoder.") and t.is_floating_point())
    assert lines[3] == f"  model: Tagger, {total:,} parameters ({total:,} trainable)"
    assert lines[4] == "  optimizer: AdamOptimizer, 2 parameter group(s)"
    # the spec's rates, not the warm-up's first step (the schedule scales the optimizer's rates)
    assert lines[5].startswith(f"    group 0: {encoder:,} parameters in ") and ", lr 0.002, first encoder." in lines[5]
    assert lines[6].startswith(f"    group 1: {total - encoder:,} parameters in ") and ", lr 0.01, first " in lines[6]
    batches = math.ceil(13 / 4)
    assert lines[7] == (f"  training: {batches} batches an epoch x 3 epochs = {3 * batches} optimizer steps, "
                        f"on CPU only ({lines[7].rsplit('(', 1)[1]}")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["spec_hash"] in lines[0]


def test_an_error_the_training_would_stop_on_stops_the_dry_run_with_nothing_written(tmp_path, tagger_spec, capsys,
                                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    tagger_spec["trainer"]["optimizer"]["parameter_groups"] = [[["^nomatch\\."], {"lr": 2e-5}]]
    path = write_spec(tmp_path, tagger_spec)
    before = files_under(tmp_path)
    code, out, err = cli(capsys, "train", path, "--dry-run")
    assert code == 2 and out == ""
    assert "parameter_groups[0]: the regex '^nomatch\\\\.' matches no parameter name" in err
    tagger_spec["trainer"]["optimizer"].pop("parameter_groups")
    tagger_spec["trainer"]["validation_metric"] = "+accuracy"
    code, out, err = cli(capsys, "train", write_spec(tmp_path, tagger_spec), "--dry-run")
    assert code == 2 and "trainer.validation_metric: the model reports no metric 'accuracy'" in err
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("flags", [["--resume"], ["--stop-after-epoch", "1"], ["--address", "127.0.0.1:6379"]])
def test_a_flag_of_a_real_training_is_refused_beside_it(tmp_path, tagger_spec, capsys, flags):
    code, out, err = cli(capsys, "train", write_spec(tmp_path, tagger_spec), "--dry-run", *flags)
    assert (code, out) == (2, "")
    assert err.strip() == f"error: --dry-run trains nothing: {flags[0]} cannot go with it"


def test_a_resource_fitted_to_the_training_data_goes_to_a_scratch_folder_that_is_removed(tmp_path, capsys,
                                                                                        monkeypatch):
    """The translator fits its target subwords to the training pairs; a training writes them under its
    run directory, the dry run under a temporary folder it removes."""
    monkeypatch.chdir(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    lines = (DATA / "tatoeba_cmn_eng" / "cmn.txt").read_text(encoding="utf-8-sig").splitlines()[2000:2012]
    train = tmp_path / "pairs.txt"
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = {"type": "translator", "embedder": {"type": "char_bigram", "char_dim": 16, "bigram_dim": 0},
             "encoder": {"type": "transformer", "hidden_size": 16, "num_layers": 1, "num_heads": 2, "ffn_dim": 32},
             "decoder": {"num_layers": 1, "num_heads": 2, "feedforward_dim": 32}, "target_vocab_size": 200,
             "beam_size": 1, "max_source_length": 60}
    path = write_spec(tmp_path, tiny_spec(model, {"type": "tatoeba_cmn_eng"}, train, task="mt", dataset="tatoeba"))
    before = files_under(tmp_path)
    code, out, err = cli(capsys, "train", path, "--dry-run")
    assert code == 0, err
    assert "  examples: train 12, validation 0, test 0" in out.splitlines()
    assert files_under(tmp_path) == before  # the subwords were fitted, under tmp/, and removed with it


def test_a_run_directory_the_training_would_refuse_is_refused_by_the_dry_run_with_the_same_error(
        tmp_path, tagger_spec, capsys, monkeypatch):
    """AllenNLP's dry run refuses a serialization directory that is not empty; so does ours, with the
    training's own message: a folder of the user's files, and a finished run that only --resume may continue."""
    monkeypatch.chdir(tmp_path)
    path = write_spec(tmp_path, tagger_spec)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine", encoding="utf-8")
    run = tmp_path / "run"
    assert cli(capsys, "train", path, "-s", run, "--no-tracking")[0] == 0
    for folder in (theirs, run):
        before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        code, out, dry_err = cli(capsys, "train", path, "-s", folder, "--dry-run")
        assert (code, out) == (2, "")
        code, _, train_err = cli(capsys, "train", path, "-s", folder, "--no-tracking")
        assert code == 2 and dry_err == train_err and dry_err.startswith(f"error: {folder}: ")
        assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    assert "holds notes.txt; nothing in it was changed" in cli(capsys, "train", path, "-s", theirs, "--dry-run")[2]
    assert "pass --resume to continue it" in cli(capsys, "train", path, "-s", run, "--dry-run")[2]
