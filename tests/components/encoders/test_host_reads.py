"""A training step of these models reads nothing back from the device: a forward and backward
pass over a batch of real sentences runs no ``aten::_local_scalar_dense`` (what ``.item()``,
``int(t)``, ``bool(t)`` run; on a GPU each is a host sync), or the stated few. The batch's shape facts (most words
in a row, longest word, longest segment) come from the collated ``LatticeBatch`` as Python ints;
the CRF's likelihood skips pytorch-crf's mask checks.

Not in the list: models with an ``nn.LSTM`` over packed sequences (PyTorch reads the packed
batch sizes, a CPU tensor, so no device sync) and the Lattice LSTM, whose recurrence reads which
steps have words once per batch by design."""
import warnings
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from multigrain.platform.config import build
from multigrain.platform.experiment import Experiment, build_vocabulary
from multigrain.platform.specs import load_spec

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.usefixtures("single_thread")


class HostReads(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten._local_scalar_dense.default
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("spec, expected", [
    ("ner/resume_big", 0), ("ner/resume_transformer", 0), ("ner/resume_star", 0), ("cls/chnsenticorp_mwa", 0),
    ("cls/chnsenticorp_big", 0), ("pair/bq_mwa", 0),
    # the pre-trainer's step counter and metric sums stay on the device; Lattice-BERT checks its
    # positions against its table with one read (the check that windows keep them inside)
    ("pretrain/lattice_bert_tiny", 1)])
def test_a_training_step_reads_nothing_from_the_device(spec, expected, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MULTIGRAIN_CACHE", str(tmp_path))
    exp = build(Experiment, load_spec(str(ROOT / "jsonnet_configs" / f"{spec}.jsonnet")))
    exp.dataset_reader.max_instances = 8
    train = list(exp.dataset_reader.read(exp.train_data_path))
    vocab = build_vocabulary(exp, exp.model_class(), train, [])
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = exp.model.construct(vocab=vocab)
    batch = model.tensorize(train)
    model.train()
    model(**batch)["loss"].backward()  # a first step may read a counter once (the pre-trainer's)
    reads = HostReads()
    with reads:
        out = model(**batch)
        out["loss"].backward()
    assert torch.isfinite(out["loss"]) and reads.count == expected
    lattice = batch.get("lattice")
    if lattice is not None:  # the shape facts are the batch's own
        words = lattice.mask & ~lattice.is_char
        assert lattice.max_words == int(words.sum(1).max())
        assert lattice.longest_word == int(((lattice.ends - lattice.starts + 1) * words).max())
