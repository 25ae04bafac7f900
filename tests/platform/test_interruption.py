"""Ctrl-C and SIGTERM are never lost: an interrupt that Python drops (raised by the handler inside a
``__del__`` or weakref callback, printed as "Exception ignored") is raised again by the training
loop at its next step, and the run stays resumable."""
from __future__ import annotations

import gc
import os
import signal
import sys
import time

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

    hook = sys.unraisablehook
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
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and sys.unraisablehook is hook


def test_ctrl_c_is_handled_as_sigterm_only_where_python_handles_it():
    with SigtermAsInterrupt():
        assert signal.getsignal(signal.SIGINT) is interruption.interrupt
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a shell: Ctrl-C is not ours
    try:
        with SigtermAsInterrupt():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
