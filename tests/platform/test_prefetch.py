"""The prefetching loader: the same batches in the same order as without it (so training is
bit-identical), errors of the background thread surface in the training thread as they were
raised, and the thread stops when the consumer stops (an exception, KeyboardInterrupt, a break)."""
import random
import threading
import time

import pytest
import torch

from multigrain.platform.batching import BatchIterator, pad_ids
from multigrain.platform.errors import DataError
from multigrain.platform.prefetch import Prefetcher, pin, prefetched
from multigrain.platform.training import seed_everything
from tests.platform.test_step_loop_sync import tagger_trainer


def iterator() -> BatchIterator:
    rng = random.Random(3)
    rows = [[rng.randint(1, 50) for _ in range(rng.randint(1, 30))] for _ in range(300)]
    return BatchIterator(rows, lambda chunk: {"ids": pad_ids(chunk), "n": torch.tensor([len(r) for r in chunk])},
                         len, 16, True, seed=5, max_tokens=200)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_the_same_batches_in_the_same_order(depth):
    data = iterator()
    for epoch in range(3):
        plain = list(data.epoch(epoch))
        with prefetched(data.epoch(epoch), depth) as ahead:
            got = list(ahead)
        assert len(got) == len(plain) == data.num_batches(epoch)
        for (chunk_a, a), (chunk_b, b) in zip(plain, got):
            assert chunk_a == chunk_b
            assert torch.equal(a["ids"], b["ids"]) and torch.equal(a["n"], b["n"])


def test_order_survives_a_jittery_producer_and_consumer():
    rng = random.Random(0)

    def slow():
        for i in range(40):
            time.sleep(rng.random() * 0.002)
            yield i

    got = []
    with Prefetcher(slow(), depth=3) as items:
        for i in items:
            time.sleep(random.random() * 0.002)
            got.append(i)
    assert got == list(range(40))


def test_training_with_prefetch_is_bit_identical_to_without(tmp_path, single_thread):
    weights = []
    for depth in (0, 2):
        seed_everything(7)
        (tmp_path / f"d{depth}").mkdir()
        trainer = tagger_trainer(tmp_path / f"d{depth}")
        trainer.prefetch = depth
        losses = [trainer._train_epoch(epoch)["loss"] for epoch in range(2)]
        weights.append((losses, {k: v.clone() for k, v in trainer.model.state_dict().items()}))
    (loss_a, a), (loss_b, b) = weights
    assert loss_a == loss_b
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_an_error_while_preparing_surfaces_with_its_message():
    closed = []

    def source():
        try:
            yield 1
            yield 2
            raise DataError("train.tsv", 17, "a source of 900 characters")
        finally:
            closed.append(threading.current_thread().name)

    got = []
    with pytest.raises(DataError, match=r"^train\.tsv:17: a source of 900 characters$") as caught:
        with prefetched(source(), 2) as items:
            for item in items:
                got.append(item)
    assert got == [1, 2]  # the batches before the failure arrive first
    assert caught.value.line == 17
    assert any("source" in str(frame.name) for frame in caught.traceback)  # raised where it happened
    assert closed == ["multigrain-prefetch"]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_the_thread_stops_when_the_consumer_does(stop):
    produced, finished = [], threading.Event()

    def endless():
        try:
            i = 0
            while True:
                produced.append(i)
                yield i
                i += 1
        finally:
            finished.set()

    before = threading.active_count()
    start = time.monotonic()
    with pytest.raises(stop):
        with prefetched(endless(), 2) as items:
            for i in items:
                if i == 3:
                    raise stop()
    assert finished.wait(5), "the producer's generator was not closed"
    assert threading.active_count() == before
    assert time.monotonic() - start < 5
    assert len(produced) <= 3 + 1 + 2 + 1  # at most depth (+ the one being put) past the last consumed


def test_a_break_stops_the_thread():
    prefetcher = Prefetcher(iter(range(10_000)), depth=2)
    with prefetcher as items:
        for i in items:
            if i == 5:
                break
    assert not prefetcher._thread.is_alive()


def test_pin_walks_the_batch_structure(monkeypatch):
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self.shape) or self)

    class Lattice:
        def pin_memory(self):
            pinned.append("lattice")
            return self

    batch = {"ids": torch.zeros(2, 3), "pair": (torch.zeros(4), [torch.zeros(1)]), "lattice": Lattice(), "names": ["a"]}
    out = pin(batch)
    assert pinned == [(2, 3), (4,), (1,), "lattice"]
    assert out["names"] == ["a"] and isinstance(out["pair"], tuple)
