"""The training log: one summary line per epoch (epoch k/N, train loss, the dev metrics with the
validation metric first, best so far and its epoch, elapsed, estimated remaining), the only output
of a training under ``CI=true``; its numbers are the epoch's record in ``metrics.json``."""
import json
import re

import pytest

from multigrain.platform.epoch_log import duration, epoch_line
from multigrain.platform.runs import Run
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA

EPOCHS = 3


def seconds(text: str) -> float:
    """``duration``'s text back to seconds."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?([\d.]+)s", text)
    hours, minutes, secs = match.groups()
    return 3600 * int(hours or 0) + 60 * int(minutes or 0) + float(secs)


def test_one_line_per_epoch_equal_to_the_history(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CI", "true")
    monkeypatch.delenv("MULTIGRAIN_QUIET", raising=False)
    src = DATA / "resume_ner" / "dev.char.bmes"
    train = copy_sentences(src, tmp_path / "train.bmes", 12)
    dev = copy_sentences(src, tmp_path / "dev.bmes", 18, start=12)
    # validation metric -loss: it moves every epoch, and it is not the model's first metric
    spec = tiny_spec(bilstm_tagger(hidden=8, dim=8), {"type": "resume_ner"}, train, dev, epochs=EPOCHS, lr=0.05,
                     task="ner", validation_metric="-loss")
    Run(spec, tmp_path / "run").train()
    out = capsys.readouterr()
    history = json.loads((tmp_path / "run" / "metrics.json").read_text())["history"]
    lines = out.err.splitlines()
    assert len(lines) == EPOCHS == len(history), out.err  # under CI=true: no progress bars, nothing else
    best, best_epoch, mean = None, None, None
    for line, record in zip(lines, history):
        k = record["epoch"]
        fields = line.split(" | ")
        assert fields[0] == f"epoch {k}/{EPOCHS}"
        assert fields[1] == f"train loss {record['train_loss']:.4f}"
        dev_names = ["loss", "precision", "recall", "f1"]  # the validation metric first, then the model's order
        assert fields[2] == "dev " + " ".join(f"{n} {record['validation_' + n]:.4f}" for n in dev_names)
        if best is None or record["validation_loss"] < best:
            best, best_epoch = record["validation_loss"], k
        assert fields[3] == f"best loss {best:.4f} (epoch {best_epoch})"
        elapsed = seconds(fields[4].removeprefix("elapsed "))
        remaining = seconds(fields[5].removeprefix("remaining ~"))
        mean = elapsed / k
        assert remaining == pytest.approx(mean * (EPOCHS - k), abs=0.051 * (EPOCHS - k) + 0.051)
    assert fields[5] == "remaining ~0.0s"
    assert not out.out  # stdout stays for results


def test_the_line_without_a_dev_set_and_the_durations():
    record = {"epoch": 2, "train_loss": 1.23456}
    assert epoch_line(record, 10, "f1", -1.2, 2, 30.0) == ("epoch 2/10 | train loss 1.2346 | best epoch 2 (lowest "
                                                          "train loss; no dev set) | elapsed 30.0s | remaining ~2m00s")
    assert [duration(s) for s in (4.24, 59.9, 65, 3723)] == ["4.2s", "59.9s", "1m05s", "1h02m03s"]
