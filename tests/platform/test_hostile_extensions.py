"""A finished run extended to more epochs (``--resume`` with a longer ``trainer.num_epochs``) whose
extension fails to start (``last.pt`` a FIFO or ``/dev/zero``) or is interrupted (Ctrl-C while
reading the data, or after the checkpoint is loaded, before the training writes one) leaves the
finished run byte for byte as it was: its ``config.json`` and ``spec_hash`` were rewritten to the
longer spec first, and ``multigrain log`` then refused the run ("metrics.json records spec hash X,
but config.json hashes to Y"). Once the checkpoint is restored, the extension continues
bit-identically to the longer run trained straight."""
import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from multigrain.platform.commands import main as cli_main
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.runs import Run
from multigrain.platform.training import load_checkpoint
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA, mlflow_runs

SCHEDULER = {"type": "inverse_time", "decay": 0.1}  # per epoch: a run may be extended


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 1-epoch run, the 2-epoch spec that extends it, and the 2-epoch run trained straight."""
    tmp = tmp_path_factory.mktemp("extension")
    src = DATA / "resume_ner" / "dev.char.bmes"
    train, dev = copy_sentences(src, tmp / "train.bmes", 16), copy_sentences(src, tmp / "dev.bmes", 8)
    short, longer = (tiny_spec(bilstm_tagger(dropout=0.3), {"type": "resume_ner"}, train, dev, epochs=epochs,
                               scheduler=SCHEDULER, task="ner") for epochs in (1, 2))
    Run(short, tmp / "e1").train()
    straight = Run(longer, tmp / "straight").train()
    return tmp, longer, straight


def files_of(run_dir: Path) -> dict:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def copy_of(finished, name: str) -> Path:
    tmp = finished[0]
    shutil.copytree(tmp / "e1", tmp / name)
    return tmp / name


def logged(run_dir: Path, capsys) -> tuple:
    uri = f"sqlite:///{run_dir.parent / (run_dir.name + '.db')}"
    code = cli_main(["log", str(run_dir), "--tracking-uri", uri])
    return code, capsys.readouterr().err, uri


@pytest.mark.parametrize("bad", ["fifo", "/dev/zero"])
def test_a_bad_last_pt_refuses_the_extension_and_leaves_the_finished_run_as_it_was(finished, bad, capsys):
    tmp, longer, straight = finished
    run_dir = copy_of(finished, f"bad-{bad.strip('/').replace('/', '-')}")
    good = (run_dir / "last.pt").read_bytes()
    (run_dir / "last.pt").unlink()
    if bad == "fifo":
        os.mkfifo(run_dir / "last.pt")
    else:
        (run_dir / "last.pt").symlink_to(bad)
    before = files_of(run_dir)  # the regular files: config.json, spec_hash, metrics.json, best.pt, ...
    with pytest.raises(ConfigurationError, match="^" + re.escape(f"{run_dir / 'last.pt'}: not a regular file (")):
        Run(longer, run_dir).train(resume=True)
    assert files_of(run_dir) == before
    (run_dir / "last.pt").unlink()
    (run_dir / "last.pt").write_bytes(good)
    assert files_of(run_dir) == files_of(tmp / "e1")  # config.json, spec_hash, metrics.json: all the 1-epoch run's
    code, err, uri = logged(run_dir, capsys)
    assert code == 0, err
    assert [r.data.params["trainer.num_epochs"] for r in mlflow_runs(uri)] == ["1"]

    extended = Run(longer, run_dir).train(resume=True)  # the good checkpoint back: the extension runs
    assert extended["history"] == straight["history"] and extended["validation"] == straight["validation"]
    a, b = load_checkpoint(tmp / "straight" / "best.pt", "cpu"), load_checkpoint(run_dir / "best.pt", "cpu")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (run_dir / "config.json").read_bytes() == (tmp / "straight" / "config.json").read_bytes()
    assert (run_dir / "spec_hash").read_text().strip() == extended["spec_hash"] == straight["spec_hash"]


@pytest.mark.parametrize("where", ["reading the data", "after the checkpoint is loaded"])
def test_ctrl_c_before_the_extension_writes_a_checkpoint_leaves_the_finished_run_as_it_was(finished, where,
                                                                                             monkeypatch, capsys):
    import multigrain.platform.run_training as run_training
    from multigrain.platform.training import Trainer

    tmp, longer, straight = finished
    run_dir = copy_of(finished, "ctrl-c-" + where.replace(" ", "-"))
    before = files_of(run_dir)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    real_read, real_train = run_training.read_all, Trainer.train
    monkeypatch.setattr(*(("multigrain.platform.run_training.read_all", interrupted) if where == "reading the data"
                          else ("multigrain.platform.training.Trainer.train", interrupted)))
    with pytest.raises(KeyboardInterrupt):
        Run(longer, run_dir).train(resume=True)
    assert files_of(run_dir) == before
    code, err, _ = logged(run_dir, capsys)
    assert code == 0, err

    monkeypatch.setattr(run_training, "read_all", real_read)
    monkeypatch.setattr(Trainer, "train", real_train)
    extended = Run(longer, run_dir).train(resume=True)
    assert extended["history"] == straight["history"] and extended["validation"] == straight["validation"]


def test_an_extension_stopped_after_its_first_checkpoint_is_the_longer_run_and_resumes(finished, monkeypatch):
    """Once the extension wrote last.pt, the directory is an unfinished run of the longer spec: its
    config.json says so, and --resume ends it bit-identically to the straight run."""
    import multigrain.platform.training as training

    tmp, longer, straight = finished
    run_dir = copy_of(finished, "stopped")
    monkeypatch.setenv("MULTIGRAIN_CHECKPOINT_SECONDS", "0")
    save = training.atomic_save

    def crash_after_one(state, path):
        save(state, path)
        if "step_in_epoch" in state:
            raise KeyboardInterrupt

    monkeypatch.setattr(training, "atomic_save", crash_after_one)
    with pytest.raises(KeyboardInterrupt):
        Run(longer, run_dir).train(resume=True)
    assert (run_dir / "config.json").read_bytes() == (tmp / "straight" / "config.json").read_bytes()
    assert load_checkpoint(run_dir / "last.pt", "cpu")["step_in_epoch"] == 1
    monkeypatch.setattr(training, "atomic_save", save)
    extended = Run(longer, run_dir).train(resume=True)
    assert extended["history"] == straight["history"] and extended["validation"] == straight["validation"]
    a, b = load_checkpoint(tmp / "straight" / "last.pt", "cpu"), load_checkpoint(run_dir / "last.pt", "cpu")
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
