"""The spec's ``initializer``: a fresh run's named tensors start as another run's, every other one
as the seed makes it; a resumed run and a loaded archive never read the source again; whatever
does not fit is one error naming the spec path, and nothing is written."""
import json
import shutil

import pytest
import torch

from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.runs import Run
from multigrain.testing import bilstm_tagger, copy_sentences, model_of_spec, tiny_spec
from tests.conftest import DATA, run_cli, write_spec

SOURCE_DATA = DATA / "resume_ner" / "dev.char.bmes"
KEPT = [r"^embedder\.", r"^encoder\."]


def spec_over(folder, initializer=None, seed=7, sentences=8, **trainer) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    train = copy_sentences(SOURCE_DATA, folder / "train.bmes", sentences)
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, task="ner", seed=seed, **trainer)
    return {**spec, "initializer": initializer} if initializer is not None else spec


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A finished 1-epoch run of the tiny BiLSTM-CRF, the run the others start from."""
    folder = tmp_path_factory.mktemp("source")
    torch.set_num_threads(1)
    Run(spec_over(folder / "data", seed=3), folder / "run").train()
    return folder / "run"


def best(run_dir) -> dict:
    return torch.load(run_dir / "best.pt", weights_only=True)


def test_the_named_tensors_start_as_the_source_runs_and_the_rest_as_the_seed_makes_them(source, tmp_path):
    from multigrain.platform.config import build
    from multigrain.platform.experiment import Experiment
    from multigrain.platform.initializer import initialize

    spec = spec_over(tmp_path / "data", {"weights": str(source), "parameters": KEPT})
    _, _, _, model = model_of_spec(spec, 100)
    seeded = {k: v.clone() for k, v in model.state_dict().items()}
    copied = initialize(model, build(Experiment, spec).initializer)
    state, saved = model.state_dict(), best(source)
    kept = [k for k in state if k.startswith(("embedder.", "encoder."))]
    assert copied == len(kept) and len(kept) >= 10
    for name in kept:
        assert torch.equal(state[name], saved[name]), name
        assert not torch.equal(state[name], seeded[name]), name  # the source's training moved every one
    others = [k for k in state if k not in kept]
    assert others and all(k.startswith("head.") for k in others)
    for name in others:
        assert torch.equal(state[name], seeded[name]), name


def test_exclude_leaves_tensors_to_the_seed(source, tmp_path):
    from multigrain.platform.config import build
    from multigrain.platform.experiment import Experiment
    from multigrain.platform.initializer import initialize

    spec = spec_over(tmp_path / "data", {"weights": str(source / "best.pt"), "parameters": [".*"],
                                         "exclude": [r"^head\.", r"\.bigrams\."]})
    _, _, _, model = model_of_spec(spec, 100)
    seeded = {k: v.clone() for k, v in model.state_dict().items()}
    initialize(model, build(Experiment, spec).initializer)
    for name, value in model.state_dict().items():
        left = name.startswith("head.") or ".bigrams." in name
        assert torch.equal(value, seeded[name] if left else best(source)[name]), name


def test_a_run_starts_from_them_resumes_and_evaluates_without_the_source(source, tmp_path, capfd):
    copy = tmp_path / "source"
    shutil.copytree(source, copy)
    spec = spec_over(tmp_path / "data", {"weights": str(copy), "parameters": KEPT}, epochs=2)
    run = Run(spec, tmp_path / "run")
    run.train(stop_after_epoch=1)
    assert "initializer: " in capfd.readouterr().err
    assert json.loads((tmp_path / "run" / "config.json").read_text())["initializer"]["weights"] == str(copy)
    shutil.rmtree(copy)  # the run has its weights: neither the resume nor evaluate reads the source
    Run.open(tmp_path / "run").train(resume=True)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["epochs_completed"] == 2
    loaded = Run.open(tmp_path / "run").load_archive(device="cpu")
    saved = best(tmp_path / "run")
    assert all(torch.equal(value, saved[name]) for name, value in loaded.model.state_dict().items())


def test_the_initializer_is_part_of_the_runs_identity(source, tmp_path):
    plain = spec_over(tmp_path / "data")
    with_it = spec_over(tmp_path / "data", {"weights": str(source), "parameters": KEPT})
    assert Run(plain, tmp_path / "a").spec_hash != Run(with_it, tmp_path / "b").spec_hash


def refused(spec, tmp_path) -> str:
    with pytest.raises(ConfigurationError) as caught:
        Run(spec, tmp_path / "run").train()
    assert not (tmp_path / "run").exists()
    return str(caught.value)


def test_a_tensor_of_another_shape_is_refused_naming_it(source, tmp_path):
    spec = spec_over(tmp_path / "data", {"weights": str(source), "parameters": KEPT}, sentences=30)
    message = refused(spec, tmp_path)  # more sentences: more characters, a larger embedding matrix
    assert message.startswith(f"initializer.weights: {source / 'best.pt'}: embedder.chars.weight has shape [")
    assert "(leave it out with initializer.exclude)" in message


def test_a_pattern_that_finds_nothing_names_the_models_modules(source, tmp_path):
    message = refused(spec_over(tmp_path / "data", {"weights": str(source), "parameters": ["^backbone\\."]}),
                      tmp_path)
    assert message == ("initializer.parameters.0: '^backbone\\\\.' matches no tensor of the model "
                       "(its modules: embedder, encoder, head)")


def test_a_tensor_the_file_lacks_is_refused(source, tmp_path):
    partial = {k: v for k, v in best(source).items() if not k.startswith("encoder.")}
    torch.save(partial, tmp_path / "partial.pt")
    message = refused(spec_over(tmp_path / "data", {"weights": str(tmp_path / "partial.pt"), "parameters": KEPT}),
                      tmp_path)
    assert message.startswith(f"initializer.weights: {tmp_path / 'partial.pt'}: has no encoder.")
    assert "more, which initializer.parameters names" in message


def test_a_file_that_is_not_a_checkpoint_is_refused(tmp_path):
    (tmp_path / "notes.pt").write_text("not weights")
    message = refused(spec_over(tmp_path / "data", {"weights": str(tmp_path / "notes.pt")}), tmp_path)
    assert message.startswith(f"initializer.weights: {tmp_path / 'notes.pt'}: not a multigrain checkpoint")


@pytest.mark.parametrize("initializer, line", [
    ({"weights": "no/such/run"}, "initializer.weights: file not found: no/such/run"),
    ({"weights": "."}, "initializer.weights: . is a folder with no best.pt (give a weights file, or a run directory"),
    ({"weights": ""}, "initializer.weights: an empty path (name a file, or a run directory)"),
    ({"weights": "x.pt", "parameters": ["enc("]},
     "initializer: InitializerConfig: parameters.0: 'enc(' is not a regular expression"),
    ({"weights": "x.pt", "parameters": []}, "initializer: InitializerConfig: parameters: expected at least one"),
    ({"weights": "x.pt", "patterns": ["a"]},
     "initializer.patterns: unknown key for InitializerConfig (did you mean 'parameters'?)"),
])
def test_bad_sections_are_spec_errors_at_their_path(initializer, line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.pt").write_bytes(b"")
    with pytest.raises(SpecError) as caught:
        Run(spec_over(tmp_path / "data", initializer), tmp_path / "run")
    assert any(found.strip().startswith(line) for found in str(caught.value).splitlines()), str(caught.value)
    assert not (tmp_path / "run").exists()


def test_the_command_line_exits_2_and_writes_nothing(source, tmp_path):
    spec = spec_over(tmp_path / "data", {"weights": str(source), "parameters": ["^nothing"]})
    result = run_cli("train", write_spec(tmp_path, spec), "-s", str(tmp_path / "run"), "--no-tracking")
    assert result.returncode == 2
    assert "initializer.parameters.0: '^nothing' matches no tensor of the model" in result.stderr
    assert not (tmp_path / "run").exists()
