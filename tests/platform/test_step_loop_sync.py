"""No host sync in the step loop: a profiler trace of an epoch of a real model (a small
Transformer tagger with a softmax head) counts ``aten::_local_scalar_dense`` (what
``.item()``, ``float(t)``, ``bool(t)`` run) only at the trainer's sync points, none per step.

Two things are left out of the count. The CPU kernel of fused Adam reads each parameter's step
count with ``item()`` inside ``aten::_fused_adam_``: on the CPU that is no device sync, and the
CUDA kernel reads the count on the device. The model is no BiLSTM: ``nn.LSTM`` over a packed
sequence reads ``int(batch_sizes[0])`` twice (a CPU tensor: no device sync, but the same event),
and the BiLSTM encoder's sync on a GPU is ``lengths.cpu()`` for packing (components, not the
trainer). The components' own step is checked in tests/components/encoders/test_host_reads.py."""
import math

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from multigrain.platform.experiment import batches_for, build_vocabulary, read_all
from multigrain.platform.runs import Run
from multigrain.platform.training import Trainer
from multigrain.testing import char_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA

SYNC = "aten::_local_scalar_dense"


TRANSFORMER = {"type": "transformer", "hidden_size": 16, "num_layers": 1, "num_heads": 2, "dropout": 0.1,
               "attention_dropout": 0.1}


def tagger_trainer(tmp_path, dropout: float = 0.1, **trainer) -> Trainer:
    """A Trainer of a Transformer tagger on 24 Resume sentences, batches of 4 (6 steps an epoch)."""
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp_path / "train.bmes", 24)
    spec = tiny_spec(char_tagger({**TRANSFORMER, "dropout": dropout, "attention_dropout": dropout}, dim=8,
                                   head="softmax_tagger", dropout=dropout), {"type": "resume_ner"}, train, task="ner",
                     grad_clipping=5.0, scheduler={"type": "linear_warmup", "warmup_steps": 2}, **trainer)
    exp = Run(spec, tmp_path / "run").experiment
    instances = read_all(exp.dataset_reader, exp.train_data_path)
    vocab = build_vocabulary(exp, exp.model_class(), instances, [])
    model = exp.model.construct(vocab=vocab)
    return Trainer(exp.trainer, model, batches_for(model, instances, exp.data_loader, exp.seed, True), None,
                   tmp_path / "run")


def inside_fused_adam(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::_fused_adam"):
            return True
        parent = parent.cpu_parent
    return False


def syncs_in_epoch(trainer: Trainer, epoch: int) -> tuple[int, dict]:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        metrics = trainer._train_epoch(epoch)
    return sum(e.name == SYNC and not inside_fused_adam(e) for e in prof.events()), metrics


@pytest.mark.parametrize("prefetch", [0, 2])
def test_an_epoch_reads_the_loss_only_at_its_sync_points(tmp_path, prefetch, single_thread):
    trainer = tagger_trainer(tmp_path)
    trainer.prefetch = prefetch
    steps = trainer.train_data.num_batches(0)
    assert steps == 6
    trainer.sync_seconds = math.inf  # no time-based sync point inside the epoch: only its end
    syncs, metrics = syncs_in_epoch(trainer, 0)
    assert syncs == 1, f"{syncs} host syncs in an epoch of {steps} steps; only the end of the epoch may sync"
    assert math.isfinite(metrics["loss"]) and metrics["loss"] > 0
    trainer.sync_seconds = 0.0  # a sync point after every step: the counter sees each of them
    syncs, _ = syncs_in_epoch(trainer, 1)
    assert syncs == steps + 1


def test_the_epoch_loss_is_the_mean_of_the_step_losses(tmp_path, single_thread):
    """The loss summed on the device equals the Python float64 sum of the steps' losses."""
    trainer = tagger_trainer(tmp_path)
    seen = []
    forward = trainer.stepped.forward

    def recording(**batch):
        out = forward(**batch)
        seen.append(float(out["loss"].detach()))
        return out

    trainer.stepped.forward = recording
    metrics = trainer._train_epoch(0)
    total = 0.0
    for loss in seen:
        total += loss
    assert len(seen) == 6 and metrics["loss"] == total / 6


def test_a_non_finite_loss_names_the_epoch_and_steps(tmp_path, single_thread):
    trainer = tagger_trainer(tmp_path)
    forward = trainer.stepped.forward
    calls = []

    def poisoned(**batch):
        out = forward(**batch)
        calls.append(1)
        if len(calls) == 4:
            out["loss"] = out["loss"] * float("nan")
        return out

    trainer.stepped.forward = poisoned
    trainer.sync_seconds = math.inf
    with pytest.raises(FloatingPointError, match=r"^epoch 3, steps 1-6: the loss became nan; a lower trainer"):
        trainer._train_epoch(2)
