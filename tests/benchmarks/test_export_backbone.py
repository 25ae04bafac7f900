"""benchmarks/export_backbone.py: the backbone of a run of the m3e-Tagger (``embedder.model``) and of
PLTE[m3e] (``embedder.backbone.model``) is saved with exactly the run's weights, and a spec's
``hf_transformer`` reads it back; a directory that is not such a run (no config.json, no weights, no
hf_transformer embedder, weights of another size) is one error naming the file, exit code 2, and
nothing is written."""
import json
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import export_backbone  # noqa: E402

TEXT = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 3000)) + "0123456789"


def fine_tuned_run(tmp_path, monkeypatch, spec_name: str):
    """A run directory of ``jsonnet_configs/ner/{spec_name}.jsonnet`` over a tiny BERT, whose
    ``best.pt`` holds the model with every backbone weight moved away from the source's."""
    from multigrain.platform.specs import load_spec
    from multigrain.testing import model_of_spec, use_local_backbone
    from tests.conftest import tiny_bert

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MULTIGRAIN_CACHE", str(tmp_path / "cache"))
    source = tiny_bert(tmp_path / "tiny", TEXT)
    spec = load_spec(str(ROOT / "jsonnet_configs" / "ner" / f"{spec_name}.jsonnet"))
    use_local_backbone(spec, source)
    _, _, _, model = model_of_spec(spec, 4)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    run = tmp_path / spec_name
    run.mkdir()
    (run / "config.json").write_text(json.dumps(spec), encoding="utf-8")
    torch.save(model.state_dict(), run / "best.pt")
    return run, model, source


@pytest.mark.parametrize("spec_name, prefix", [("resume_tagger_m3e", "embedder.model."),
                                               ("resume_plte_m3e", "embedder.backbone.model.")])
def test_the_saved_backbone_holds_the_runs_weights_and_loads_as_a_backbone(tmp_path, monkeypatch, spec_name, prefix):
    from multigrain.components.embedders.hf_transformer import HfTransformer

    run, model, source = fine_tuned_run(tmp_path, monkeypatch, spec_name)
    out = tmp_path / "exported"
    assert export_backbone.main([str(run), "--out", str(out)]) == 0
    backbone = HfTransformer(str(out), special_tokens=True)
    trained = {k[len(prefix):]: v for k, v in model.state_dict().items() if k.startswith(prefix)}
    saved = backbone.model.state_dict()
    assert trained and saved.keys() == trained.keys()
    assert all(torch.equal(saved[k], trained[k]) for k in saved)
    original = HfTransformer(source, special_tokens=True).model.state_dict()
    assert not any(torch.equal(saved[k], original[k]) for k in saved)  # the run's weights, not the source's
    record = json.loads((out / "export.json").read_text(encoding="utf-8"))
    assert record["tensors"] == len(trained) and record["source"] == source
    assert not (tmp_path / "exported.tmp").exists()


def test_out_replaces_only_an_earlier_export_never_the_run_or_a_folder_of_other_files(tmp_path, monkeypatch):
    run, _, _ = fine_tuned_run(tmp_path, monkeypatch, "resume_tagger_m3e")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine", encoding="utf-8")
    kept = {p: p.read_bytes() for p in run.iterdir()}
    cases = [(taken, f"--out {taken}: there already, and not an earlier output of this command (it holds no "
                     f"export.json); give a new folder, or remove it yourself"),
             (run, f"--out {run}: it is, holds or lies in {run}, which the command reads; give a new folder"),
             (tmp_path, f"--out {tmp_path}: it is, holds or lies in {run}, which the command reads")]
    for out, message in cases:
        done = run_export(str(run), "--out", str(out))
        assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(f"error: {message}"), \
            done.stderr[-2000:]
    assert (taken / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert {p: p.read_bytes() for p in run.iterdir()} == kept
    out = tmp_path / "exported"
    for _ in range(2):  # an earlier export is replaced
        assert export_backbone.main([str(run), "--out", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("exported")) == ["exported"]


def run_export(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_backbone.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_what_is_not_such_a_run_is_one_error_naming_the_file_and_nothing_is_written(tmp_path, monkeypatch):
    from tests.conftest import tiny_bert

    out = tmp_path / "exported"
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [(empty, f"{empty / 'config.json'}: no such file (not a run directory)")]
    lstm = tmp_path / "lstm"
    lstm.mkdir()
    (lstm / "config.json").write_text(json.dumps({"model": {"embedder": {"type": "char_bigram"}}}), encoding="utf-8")
    cases.append((lstm, f"{lstm / 'config.json'}: the run has no hf_transformer embedder"))
    source = tiny_bert(tmp_path / "tiny", TEXT[:50])
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    config = {"model": {"embedder": {"type": "hf_transformer", "model_path": source}}}
    (unfinished / "config.json").write_text(json.dumps(config), encoding="utf-8")
    cases.append((unfinished, f"file not found: {unfinished / 'best.pt'} (paths are relative to"))
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (garbage / "best.pt").write_bytes(b"not weights")
    cases.append((garbage, f"{garbage / 'best.pt'}: not a multigrain checkpoint, or damaged"))
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(config), encoding="utf-8")
    bigger = tiny_bert(tmp_path / "bigger", TEXT[:50], hidden=48)
    from transformers import BertModel

    state = BertModel.from_pretrained(bigger).state_dict()
    torch.save({f"embedder.model.{k}": v for k, v in state.items()}, other / "best.pt")
    cases.append((other, f"{other / 'best.pt'}: its backbone does not fit this one: "))
    for run, message in cases:
        done = run_export(str(run), "--out", str(out))
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.strip().splitlines()[-1].startswith(f"error: {message}"), done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        assert not out.exists() and not (tmp_path / "exported.tmp").exists()
