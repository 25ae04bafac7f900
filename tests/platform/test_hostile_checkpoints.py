"""Hostile checkpoints and archives: a ``last.pt``/``best.pt`` that loads but does not fit the run,
a pickle payload, a FIFO in place of a checkpoint, a full disk while saving. Each is one clear
error naming the file (exit 2 from the CLI, no traceback), nothing runs, nothing is half-written,
nothing hangs (the CLI runs in subprocesses with a timeout)."""
import copy
import errno
import json
import os
import pickle
import shutil
import socket
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from multigrain.platform import archive as files
from multigrain.platform.checkpoints import load_checkpoint
from multigrain.platform.errors import ConfigurationError, MultigrainError
from multigrain.platform.experiment import batches_for, eval_batches, read_all
from multigrain.platform.runs import Run
from multigrain.platform.training import Trainer
from multigrain.platform.weights import save_weights, write_atomically
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA, run_cli


class Payload:
    """Unpickling it runs ``touch MARKER``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def spec_in(folder: Path, epochs: int = 3) -> dict:
    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, folder / "train.bmes", 12)
    dev = copy_sentences(src, folder / "dev.bmes", 16, start=12)
    return tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, dev, dev, epochs=epochs,
                     task="ner", scheduler={"type": "step", "step_size": 2, "gamma": 0.9}, moving_average=0.9)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(spec, a run stopped after 2 of its 3 epochs, the same run trained to the end)."""
    folder = tmp_path_factory.mktemp("hostile")
    spec = spec_in(folder)
    Run(spec, folder / "stopped").train(stop_after_epoch=2)
    Run(spec, folder / "full").train()
    return spec, folder / "stopped", folder / "full"


def snapshot(run_dir: Path) -> dict:
    return {str(p.relative_to(run_dir)): p.read_bytes() if p.is_file() else None for p in sorted(run_dir.rglob("*"))}


def damaged_copy(run_dir: Path, where: Path, name: str, state) -> Path:
    copy_dir = where / "run"
    shutil.copytree(run_dir, copy_dir)
    torch.save(state, copy_dir / name)
    return copy_dir


def without(state: dict, key: str) -> dict:
    return {k: v for k, v in state.items() if k != key}


def replaced(state: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(state)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def first_model_tensor(state: dict) -> str:
    return next(iter(state["model"]))


LAST_PT_CASES = {
    "no best": (lambda s: without(s, "best"), r"not a training checkpoint \(no best\)"),
    "model not a dict": (lambda s: replaced(s, ("model",), [1, 2]), r"model: expected a dict of tensors, found a list"),
    "model tensor of another shape": (
        lambda s: replaced(s, ("model", first_model_tensor(s)), torch.zeros(3, 5)),
        r"the weights do not fit the run's model: \S+ has shape \(3, 5\) in the file, \(\d+, 8\) in the model"),
    "model tensor missing": (lambda s: replaced(s, ("model",), dict(list(s["model"].items())[1:])),
                             r"the weights do not fit the run's model: \S+ is missing from the file"),
    "garbage torch RNG": (lambda s: replaced(s, ("rng", "torch"), torch.randint(0, 256, (5056,), dtype=torch.uint8)),
                          r"rng.torch: not a torch RNG state"),
    "python RNG a string": (lambda s: replaced(s, ("rng", "python"), "x"), r"rng.python: not a Python RNG state"),
    "numpy RNG position past its keys": (lambda s: replaced(s, ("rng", "numpy", 2), 10**9),
                                         r"rng.numpy: not a NumPy RNG state"),
    "history an int": (lambda s: replaced(s, ("history",), 3), r"history: is an int \(3\), expected a list"),
    "epoch -5": (lambda s: replaced(s, ("epoch",), -5), r"epoch: is an int \(-5\), expected an int in 0..3"),
    "epoch 10**9": (lambda s: replaced(s, ("epoch",), 10**9),
                    r"epoch: is an int \(1000000000\), expected an int in 0..3"),
    "two optimizer param groups": (
        lambda s: replaced(s, ("optimizer", "param_groups"), s["optimizer"]["param_groups"] * 2),
        r"optimizer: 2 parameter groups in the file, 1 in the run's optimizer"),
    "optimizer group of fewer parameters": (
        lambda s: replaced(s, ("optimizer", "param_groups", 0, "params"),
                           s["optimizer"]["param_groups"][0]["params"][1:]),
        r"optimizer.param_groups\[0\]: holds \d+ parameters in the file, \d+ in the run's model"),
    "optimizer state of another shape": (
        lambda s: replaced(s, ("optimizer", "state", 0, "exp_avg"), torch.zeros(2)),
        r"optimizer.state\[0\].exp_avg: is a tensor of shape \(2,\), expected a tensor of the parameter's shape"),
    "optimizer betas changed": (
        lambda s: replaced(s, ("optimizer", "param_groups", 0, "betas"), (0.5, 0.5)),
        r"optimizer.param_groups\[0\].betas: is \(0.5, 0.5\) in the file"),
    "scheduler settings changed": (lambda s: replaced(s, ("scheduler", "step_size"), 0),
                                   r"scheduler.step_size: is 0 in the file, 2 for the run's spec"),
    "step_in_epoch past the epoch's batches": (
        lambda s: replaced(replaced(s, ("step_in_epoch",), 10**6), ("epoch_loss",), 1.0),
        r"step_in_epoch: is an int \(1000000\), expected an int in 0..\d+ \(the batches of epoch 3\)"),
    "step_in_epoch a string": (lambda s: replaced(replaced(s, ("step_in_epoch",), "3"), ("epoch_loss",), 1.0),
                               r"step_in_epoch: is a str .*, expected an int in 0..\d+"),
    "epoch_loss not finite": (
        lambda s: replaced(replaced(s, ("step_in_epoch",), 1), ("epoch_loss",), float("nan")),
        r"epoch_loss: is a float \(nan\), expected the finite loss sum of the epoch's steps"),
    "averaged weights of another shape": (
        lambda s: replaced(s, ("moving_average", "shadow", first_model_tensor(s)), torch.zeros(1)),
        r"moving_average.shadow.\S+: is a tensor of shape \(1,\)"),
}


@pytest.mark.parametrize("case", list(LAST_PT_CASES))
def test_a_last_pt_that_does_not_fit_is_one_error_and_resume_writes_nothing(trained, tmp_path, case):
    spec, stopped, _ = trained
    damage, message = LAST_PT_CASES[case]
    run_dir = damaged_copy(stopped, tmp_path, "last.pt", damage(load_checkpoint(stopped / "last.pt", "cpu")))
    before = snapshot(run_dir)
    with pytest.raises(ConfigurationError, match=message) as error:
        Run(spec, run_dir).train(resume=True)
    assert str(error.value).startswith(f"{run_dir / 'last.pt'}")
    assert snapshot(run_dir) == before


def test_the_cli_reports_a_damaged_last_pt_best_pt_and_a_fifo_without_hanging(trained, tmp_path):
    spec, stopped, _ = trained
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    (tmp_path / "in.jsonl").write_text('{"text": "张三在北京"}\n', encoding="utf-8")
    dev = spec["validation_data_path"]

    bad_epoch = replaced(load_checkpoint(stopped / "last.pt", "cpu"), ("epoch",), 10**9)
    run_dir = damaged_copy(stopped, tmp_path / "a", "last.pt", bad_epoch)
    out = run_cli("train", spec_file, "-s", run_dir, "--resume", "--no-tracking", timeout=120)
    check(out, f"error: {run_dir / 'last.pt'}: damaged training checkpoint: epoch: is an int (1000000000)")

    best = load_checkpoint(stopped / "best.pt", "cpu")
    name = next(iter(best))
    run_dir = damaged_copy(stopped, tmp_path / "b", "best.pt", {**best, name: torch.zeros(2, 3)})
    for command in (("evaluate", run_dir, dev), ("predict", run_dir, tmp_path / "in.jsonl")):
        check(run_cli(*command, timeout=120), f"error: {run_dir / 'best.pt'}: the weights do not fit the run's "
                                              f"model: {name} has shape (2, 3) in the file")

    run_dir = tmp_path / "c" / "run"
    shutil.copytree(stopped, run_dir)
    for name in ("last.pt", "best.pt"):
        (run_dir / name).unlink()
        os.mkfifo(run_dir / name)
    out = run_cli("train", spec_file, "-s", run_dir, "--resume", "--no-tracking", timeout=60)
    check(out, f"error: {run_dir / 'last.pt'}: not a regular file (a FIFO (named pipe))")
    check(run_cli("evaluate", run_dir, dev, timeout=60), f"{run_dir / 'best.pt'}: not a regular file (a FIFO")
    check(run_cli("predict", run_dir, tmp_path / "in.jsonl", timeout=60),
          f"{run_dir / 'best.pt'}: not a regular file (a FIFO")


def check(out, message: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_files_that_are_not_regular_are_refused_before_they_are_opened(tmp_path):
    os.mkfifo(tmp_path / "fifo.pt")
    (tmp_path / "dir.pt").mkdir()
    (tmp_path / "null.pt").symlink_to("/dev/null")
    sock = socket.socket(socket.AF_UNIX)
    sock_path = Path(tempfile.mkdtemp()) / "s.pt"  # a short path: AF_UNIX names are limited
    sock.bind(str(sock_path))
    try:
        for path, kind in ((tmp_path / "fifo.pt", "a FIFO"), (tmp_path / "dir.pt", "a directory"),
                           (tmp_path / "null.pt", "a character device"), (sock_path, "a socket")):
            with pytest.raises(ConfigurationError, match=f"{path}: not a regular file \\({kind}"):
                load_checkpoint(path, "cpu")
    finally:
        sock.close()
        shutil.rmtree(sock_path.parent)
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(ConfigurationError, match=r"empty.pt: not a multigrain checkpoint, or damaged "
                                                 r"\(an empty file\)"):
        load_checkpoint(tmp_path / "empty.pt", "cpu")


# ------------------------------------------------------------------------------- archive_path
def char_transformer(archive_path):
    from multigrain.components.encoders.char_transformer import CharTransformer
    from multigrain.platform.vocab import Vocabulary

    return CharTransformer(Vocabulary(), hidden_size=8, num_layers=1, num_heads=2, max_length=8,
                           archive_path=str(archive_path))


def test_char_transformer_archive_path_refuses_hostile_files_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    good = {"tokens.weight": torch.zeros(2, 8)}
    torch.save({**good, "x": Payload(marker)}, tmp_path / "payload.pt")
    (tmp_path / "bare.pt").write_bytes(pickle.dumps(Payload(marker)))
    torch.save({"x": Payload(marker)}, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    torch.save(good, tmp_path / "good.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "good.pt").read_bytes()[:60])
    (tmp_path / "empty.pt").write_bytes(b"")
    torch.save([torch.zeros(2)], tmp_path / "list.pt")
    torch.save({"tokens.weight": [1, 2]}, tmp_path / "values.pt")
    os.mkfifo(tmp_path / "fifo.pt")
    blocked = (r"it names the Python object posix.system, which a file of weights never holds; "
               r"refused without running it")
    cases = {
        "payload.pt": blocked, "bare.pt": "not a torch file of weights: Unsupported operand",
        "legacy.pt": blocked, "cut.pt": "a truncated or damaged torch zip file", "empty.pt": r"\(an empty file\)",
        "list.pt": r"not a multigrain checkpoint \(holds a list\)",
        "values.pt": r"tokens.weight is a list, not a tensor",
        "fifo.pt": r"not a regular file \(a FIFO",
    }
    for name, message in cases.items():
        with pytest.raises(ConfigurationError, match=f"archive_path: {tmp_path / name}: .*{message}"):
            char_transformer(tmp_path / name)
    assert not marker.exists()


def test_a_hostile_archive_path_in_a_spec_names_the_spec_path(trained, tmp_path):
    from multigrain.testing import CHAR_TRANSFORMER

    marker = tmp_path / "ran"
    torch.save({"x": Payload(marker)}, tmp_path / "payload.pt")
    spec = copy.deepcopy(trained[0])
    spec["model"]["embedder"] = {**CHAR_TRANSFORMER, "archive_path": str(tmp_path / "payload.pt")}
    with pytest.raises(ConfigurationError, match=r"model.embedder: CharTransformer: archive_path: .*payload.pt: .*"
                                                 r"posix.system"):
        Run(spec, tmp_path / "run").train()
    assert not marker.exists() and not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------- a full disk
def full_disk_after(head: bytes):
    """A writer that writes ``head``, then fails as a full disk does."""
    def write(f):
        f.write(head)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return write


def test_a_full_disk_leaves_no_tmp_and_the_file_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "last.pt"
    save_weights({"w": torch.ones(3)}, target)
    before = target.read_bytes()
    monkeypatch.setattr(torch, "save", lambda obj, f: full_disk_after(b"PK\x03\x04 half")(f))
    with pytest.raises(ConfigurationError, match=f"no space left on device writing {target}"):
        save_weights({"w": torch.ones(100_000)}, target)
    assert target.read_bytes() == before and not (tmp_path / "last.pt.tmp").exists()
    with pytest.raises(ConfigurationError, match="no space left on device writing .*m.json"):
        write_atomically(tmp_path / "m.json", full_disk_after(b"{"))
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "m.json.tmp").exists()


def test_ctrl_c_inside_torch_save_is_an_interrupt_and_the_file_stays(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM (a KeyboardInterrupt) in a write of torch.save's zip writer: torch's
    ``__exit__`` then failed with ``RuntimeError: unexpected pos``, a traceback and exit 1."""
    import io

    from multigrain.platform import weights

    target = tmp_path / "last.pt"
    save_weights({"w": torch.ones(3)}, target)
    before, real_fdopen = target.read_bytes(), os.fdopen

    class Interrupted(io.FileIO):
        writes = 0

        def write(self, data):
            Interrupted.writes += 1
            if Interrupted.writes == 3:
                raise KeyboardInterrupt
            return super().write(data)

    monkeypatch.setattr(weights.os, "fdopen", lambda fd, mode, **kw: Interrupted(fd, mode) if mode == "wb" else
                        real_fdopen(fd, mode, **kw))
    with pytest.raises(KeyboardInterrupt) as stopped:
        save_weights({"w": torch.ones(100_000), "v": torch.zeros(10)}, target)
    assert type(stopped.value) is KeyboardInterrupt and Interrupted.writes == 3
    assert target.read_bytes() == before and not (tmp_path / "last.pt.tmp").exists()


# ------------------------------------------------------------------ links planted in a run directory
def test_a_tmp_link_is_replaced_never_written_through(tmp_path):
    """A ``.tmp`` that is a symbolic link (planted in a copied run directory) is removed and made
    anew inside the folder: the file it points to, outside, keeps its bytes."""
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's notes\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("metrics.json", "last.pt", "config.json", "spec_hash", ".multigrain-run"):
        (run_dir / (name + ".tmp")).symlink_to(outside)
    write_atomically(run_dir / "metrics.json", lambda f: f.write(b"{}"))
    save_weights({"w": torch.ones(2)}, run_dir / "last.pt")
    files.write_run_spec(run_dir, {"a": 1})
    from multigrain.platform import run_marker

    run_marker.write_marker(run_dir)
    assert outside.read_text() == "the user's notes\n"
    written = ["metrics.json", "last.pt", "config.json", "spec_hash", ".multigrain-run"]
    assert all((run_dir / n).is_file() and not (run_dir / n).is_symlink() for n in written)
    assert json.loads((run_dir / "config.json").read_text()) == {"a": 1} and not list(run_dir.glob("*.tmp"))


def test_a_resume_writes_inside_its_run_directory_only(trained, tmp_path):
    """The audit's case: a stopped run whose ``.tmp`` files are links to files outside it, resumed
    to its end: the outside files keep their bytes, and the run finishes as the one never stopped."""
    spec, stopped, full = trained
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in (".multigrain-run", "metrics.json", "last.pt", "best.pt", "config.json", "spec_hash"):
        (outside / name).write_text(f"keep {name}\n")
        (run_dir / (name + ".tmp")).symlink_to(outside / name)
    Run(spec, run_dir).train(resume=True)
    assert all((outside / n).read_text() == f"keep {n}\n" for n in os.listdir(outside))
    # the links a resume had no cause to write through are left as they were, still unfollowed
    assert not [p for p in run_dir.rglob("*") if p.is_symlink() and p.suffix != ".tmp"]
    assert not (run_dir / "metrics.json.tmp").exists() and not (run_dir / "last.pt.tmp").exists()
    ours, theirs = (json.loads((d / "metrics.json").read_text()) for d in (run_dir, full))
    assert ours["test"] == theirs["test"] and ours["epochs_completed"] == theirs["epochs_completed"] == 3


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    """The training lock beside a run directory is never followed: a link there is one error, and
    the file it points to (elsewhere) is neither emptied nor removed."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    keep = elsewhere / "keep.txt"
    keep.write_text("keep me\n")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / ".r.lock").symlink_to(keep)
    with pytest.raises(ConfigurationError, match=r"\.r\.lock: a symbolic link where multigrain keeps a lock file"):
        with files.training_lock(runs / "r"):
            pass
    assert keep.read_text() == "keep me\n" and (runs / ".r.lock").is_symlink()
    (runs / ".d.lock").symlink_to(elsewhere / "missing.txt")  # a dangling link: nothing made there either
    with pytest.raises(ConfigurationError, match="a symbolic link"):
        with files.training_lock(runs / "d"):
            pass
    assert not (elsewhere / "missing.txt").exists()


def test_a_full_disk_mid_training_is_one_error_and_resume_finishes_bit_identically(trained, tmp_path, monkeypatch,
                                                                                    capsys):
    from multigrain.platform.commands import main

    spec, _, full = trained
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    run_dir = tmp_path / "run"
    real_save, states = torch.save, []

    def full_disk(obj, f, *args, **kwargs):
        if isinstance(obj, dict) and "epoch" in obj:
            states.append(obj["epoch"])
            if obj["epoch"] == 2:  # last.pt of epoch 2: half written, then the disk is full
                f.write(b"PK\x03\x04 half a checkpoint")
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch, "save", full_disk)
    assert main(["train", str(spec_file), "-s", str(run_dir), "--no-tracking"]) == 2
    err = capsys.readouterr().err
    assert f"error: no space left on device writing {run_dir / 'last.pt'}" in err and "Traceback" not in err
    assert states == [1, 2] and not list(run_dir.glob("*.tmp")) and not (run_dir / "metrics.json").exists()
    assert load_checkpoint(run_dir / "last.pt", "cpu")["epoch"] == 1  # the previous one, intact
    monkeypatch.setattr(torch, "save", real_save)
    assert main(["train", str(spec_file), "-s", str(run_dir), "--resume", "--no-tracking"]) == 0
    a, b = load_checkpoint(run_dir / "last.pt", "cpu"), load_checkpoint(full / "last.pt", "cpu")
    assert a["model"].keys() == b["model"].keys() and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["history"] == b["history"]


# ------------------------------------------------------------------------------- any damage
REPLACEMENTS = [-5, 0, 1, 2, 10**9, "x", [1, 2], None, torch.zeros(3), torch.zeros(2, 7), torch.tensor(1.0),
                torch.zeros(0)]
DROP = object()


def entries(value, path=()):
    """The paths of every entry of a checkpoint (not inside sequences longer than 8: RNG keys)."""
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from entries(item, path + (key,))
    elif isinstance(value, (list, tuple)) and len(value) <= 8:
        for i, item in enumerate(value):
            yield from entries(item, path + (i,))


def mutated(value, path: tuple, new):
    """``value`` with the entry at ``path`` replaced by ``new`` (or dropped); unchanged where
    ``path`` no longer leads anywhere (an earlier mutation replaced a container)."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(value, dict) and key in value:
        if not rest and new is DROP:
            return {k: v for k, v in value.items() if k != key}
        return {**value, key: new if not rest else mutated(value[key], rest, new)}
    if isinstance(value, (list, tuple)) and isinstance(key, int) and key < len(value):
        items = list(value)
        if not rest and new is DROP:
            del items[key]
        else:
            items[key] = new if not rest else mutated(items[key], rest, new)
        return type(value)(items)
    return value


@pytest.fixture(scope="module")
def resumable(trained, tmp_path_factory):
    """(a Trainer of the run's spec writing into a scratch folder, the stopped run's last.pt, a
    file to write damaged copies to)."""
    spec, stopped, _ = trained
    run = Run(spec, stopped)
    exp = run.experiment
    model = exp.model.construct(vocab=files.read_vocabulary(stopped),
                                offered={"resources": files.run_resources(stopped)})
    train = read_all(exp.dataset_reader, exp.train_data_path)
    dev = read_all(exp.validation_dataset_reader, exp.validation_data_path)
    scratch = tmp_path_factory.mktemp("scratch")
    trainer = Trainer(exp.trainer, model, batches_for(model, train, exp.data_loader, exp.seed, True),
                      eval_batches(model, dev, exp.data_loader), scratch)
    return trainer, load_checkpoint(stopped / "last.pt", "cpu"), scratch / "damaged.pt"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_damaged_last_pt_resumes_correctly_or_is_one_clear_error(resumable, data):
    trainer, base, damaged = resumable
    paths = list(entries(base))
    state = base
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.sampled_from(paths), label="path")
        new = data.draw(st.sampled_from([DROP, *REPLACEMENTS]), label="new value")
        state = mutated(state, path, new)
    torch.save(state, damaged)
    try:
        trainer.restore(damaged)
    except MultigrainError as e:
        assert str(e).startswith(str(damaged)), e
        event("refused")
        return
    event("loaded")
    trainer.train()  # what loaded trains on to the end
    assert trainer.finished
