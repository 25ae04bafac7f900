"""Prediction and evaluation batches: the spec's ``eval_batch_size`` (or ``--batch-size``),
length-bucketed, predictions back in input order."""
import torch

from multigrain.platform.archive import Archive
from multigrain.platform.batching import DataLoaderConfig


class EchoModel(torch.nn.Module):
    """Predicts each example's own text; records the batches it was given."""

    def __init__(self):
        super().__init__()
        self.batches = []

    def instance_length(self, instance):
        return len(instance)

    def tensorize(self, instances):
        return {"lengths": torch.tensor([len(x) for x in instances])}

    def forward(self, lengths):
        self.batches.append(lengths.tolist())
        return {"lengths": lengths}

    def make_output_human_readable(self, output, instances):
        return [{"text": x, "length": int(n)} for x, n in zip(instances, output["lengths"])]


def archive(eval_batch_size):
    model = EchoModel()
    loader = DataLoaderConfig(batch_size=32, eval_batch_size=eval_batch_size)
    return Archive(None, {}, model, None, None, torch.device("cpu"), loader), model


TEXTS = ["x" * n for n in (5, 1, 9, 2, 8, 3, 7, 4, 6)]


def test_predictions_come_back_in_input_order_from_length_buckets():
    arch, model = archive(eval_batch_size=3)
    preds = list(arch.predict_batches(TEXTS))
    assert [p["text"] for p in preds] == TEXTS
    assert model.batches == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]  # bucketed by length, 3 a batch


def test_batch_size_argument_overrides_the_spec():
    arch, model = archive(eval_batch_size=3)
    list(arch.predict_batches(TEXTS, batch_size=4))
    assert [len(b) for b in model.batches] == [4, 4, 1]


def test_evaluation_batches_use_the_spec_eval_batch_size():
    arch, _ = archive(eval_batch_size=2)
    assert [len(b) for b in arch.batches(TEXTS).batches(0)] == [2, 2, 2, 2, 1]
