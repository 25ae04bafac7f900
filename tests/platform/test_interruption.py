"""Ctrl-C and SIGTERM are never lost: an interrupt that Python drops (raised by the handler inside a
``__del__`` or weakref callback, printed as "Exception ignored") is raised again by the training
loop at its next step, and the run stays resumable."""
from __future__ import annotations

import gc
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from multigrain.platform import interruption
from multigrain.platform.commands.interrupt import SigtermAsInterrupt
from multigrain.platform.runs import Run
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA


class SignalledWhileCollected:
    """An object whose ``__del__`` receives SIGTERM: the handler's KeyboardInterrupt is dropped."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs here, inside __del__


@pytest.fixture
def dropped(monkeypatch):
    """The exceptions Python dropped ("Exception ignored in ...")."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))
    return seen


def test_an_interrupt_python_drops_is_raised_at_the_next_check(dropped):
    class Failing:
        def __del__(self):
            raise ValueError("another exception Python drops")

    hook, handler = sys.unraisablehook, signal.getsignal(signal.SIGTERM)  # Ray's, after an earlier test's Ray
    with SigtermAsInterrupt():
        interruption.check()  # nothing pending
        SignalledWhileCollected()
        gc.collect()
        with pytest.raises(KeyboardInterrupt):
            interruption.check()
        Failing()
        gc.collect()
    assert dropped == [ValueError]  # not the interrupt: it is raised again, not printed
    interruption.check()  # leaving the command clears it
    assert signal.getsignal(signal.SIGTERM) is handler and sys.unraisablehook is hook


def test_ctrl_c_is_handled_as_sigterm_only_where_python_handles_it():
    was = signal.signal(signal.SIGINT, signal.default_int_handler)  # a test worker may ignore it
    try:
        with SigtermAsInterrupt():
            assert signal.getsignal(signal.SIGINT) is interruption.interrupt
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a shell: Ctrl-C is not ours
        with SigtermAsInterrupt():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, was)


def test_training_stops_at_the_step_after_a_dropped_interrupt_and_resumes(tmp_path, dropped):
    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, tmp_path / "train.bmes", 16)
    spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, epochs=3, task="ner")
    spec["data_loader"] = {"batch_size": 4}

    def dropped_at_epoch_1(epoch, record):
        if epoch == 1:
            SignalledWhileCollected()
            gc.collect()

    with SigtermAsInterrupt():
        with pytest.raises(KeyboardInterrupt):
            Run(spec, tmp_path / "run").train(on_epoch=dropped_at_epoch_1)
    assert not dropped and not (tmp_path / "run" / "metrics.json").exists()
    result = Run(spec, tmp_path / "run").train(resume=True)
    assert result["epochs_completed"] == 3 and [r["epoch"] for r in result["history"]] == [1, 2, 3]


def module_signalled_while_imported(tmp_path, monkeypatch, name: str, seconds: float) -> None:
    """A module ``name`` whose import sends SIGTERM, then lasts ``seconds`` more."""
    (tmp_path / f"{name}.py").write_text(
        f"import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep({seconds})\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_an_interrupt_inside_an_import_comes_once_the_import_is_done(tmp_path, monkeypatch):
    """torch drops a KeyboardInterrupt raised while it imports NumPy, leaving NumPy half made: the
    handler lets an import finish, then the interrupt comes."""
    module_signalled_while_imported(tmp_path, monkeypatch, "interrupted_while_imported", 0.3)
    with SigtermAsInterrupt():
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            import interrupted_while_imported  # noqa: F401
            time.sleep(5)  # the interrupt comes here
        assert 0.3 < time.monotonic() - started < 3
    assert sys.modules["interrupted_while_imported"].DONE


def handles_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a handler of SIGTERM (Linux: its SigCgt mask)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_sigterm_stops_every_command_as_ctrl_c_does(tmp_path, command):
    """SIGTERM was the default exit for every command but train, suite, sweep and serve: exit -15,
    and predict's temporary output stayed."""
    import subprocess

    from tests.conftest import ROOT

    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, tmp_path / "train.bmes", 8)
    Run(tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, train, epochs=1, task="ner"),
        tmp_path / "run").train()
    many = tmp_path / "many.bmes"
    many.write_text(Path(train).read_text(encoding="utf-8") * 2000, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-P", "-m", "multigrain.platform.cli", command, str(tmp_path / "run"),
                             str(many), "--output-file", str(tmp_path / "out.jsonl")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CI": "true", "OMP_NUM_THREADS": "1"})
    while not handles_sigterm(proc.pid) and proc.poll() is None:  # inside the command
        time.sleep(0.05)
    time.sleep(1.0)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.strip().endswith("interrupted") and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.bmes", "run", "train.bmes"]


def test_a_sigterm_during_ray_init_is_an_interrupt_and_none_is_lost(monkeypatch):
    """ray.init sets a SIGTERM handler of its own, ``sys.exit(signum)``, for its whole length (exit 15,
    no clean-up), and one deferred during an import and then sent to it was dropped."""
    import ray

    from multigrain.platform.ray import cluster

    def exits(**kwargs):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)

    def drops(**kwargs):
        interruption._pending = True  # deferred, then sent to Ray's handler and dropped

    monkeypatch.setattr(ray, "shutdown", lambda: None)
    with SigtermAsInterrupt():
        for init in (exits, drops):
            monkeypatch.setattr(ray, "init", init)
            with pytest.raises(KeyboardInterrupt):
                cluster._ray_init(address="local")
            assert signal.getsignal(signal.SIGTERM) is interruption.interrupt
            interruption.clear()


def test_after_ray_shutdown_sigterm_is_still_an_interrupt():
    """ray.shutdown resets the process's SIGTERM action to the default (Python still reports its
    handler): a SIGTERM in a command's last steps killed it (exit -15)."""
    import subprocess

    code = """
import ctypes, os, signal, time
import ray
from multigrain.platform.commands.interrupt import SigtermAsInterrupt
from multigrain.platform.ray import cluster
ray.shutdown = lambda: ctypes.CDLL(None).signal(signal.SIGTERM, 0)  # as Ray's does, below Python
with SigtermAsInterrupt():
    cluster.shutdown()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except KeyboardInterrupt:
        print("interrupted")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "interrupted", (done.returncode, done.stderr[-2000:])


def test_an_import_that_hangs_is_still_interrupted(tmp_path, monkeypatch):
    monkeypatch.setattr(interruption, "MAX_DEFER_S", 0.5)
    module_signalled_while_imported(tmp_path, monkeypatch, "hangs_when_imported", 30)
    with SigtermAsInterrupt():
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            import hangs_when_imported  # noqa: F401
        assert 0.4 < time.monotonic() - started < 5


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_teardown_keeps_the_finished_commands_exit_code(tmp_path, signum):
    """After the command had printed its output, a signal during the interpreter's teardown (atexit
    hooks: 1-3 s with torch and MLflow loaded) was SIGTERM's default exit (-15), or for Ctrl-C an
    "Exception ignored in atexit callback" traceback and exit -2."""
    import subprocess

    (tmp_path / "slow_teardown.py").write_text(
        "import atexit, sys, time\n"
        "atexit.register(lambda: (print('tearing down', file=sys.stderr, flush=True), time.sleep(20)))\n")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "multigrain.platform.cli", "--include-package", "slow_teardown",
                             "components"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr.readline() == "tearing down\n"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and time.monotonic() - started < 15, (proc.returncode, err)
    assert "Traceback" not in err and "crf" in out  # the command's whole output: the component list
