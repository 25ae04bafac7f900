"""Batches prepared ahead, on a background thread, while the model computes on the current one.

A training step spends its time in two places: building the batch on the host (padding id
lists, collating lattices: ``BatchIterator.tensorize``) and running the model. ``prefetched``
moves the first to a thread that stays ``depth`` batches ahead, so on a GPU the host work hides
behind the device's, and on a CPU it overlaps with the model's single-threaded stretches.

Determinism. One producer thread iterates the source in its own order and the consumer takes
items first in, first out: the batches and their order are exactly those of the source, so a
run with prefetching is bit-identical to one without (and resume stays bit-identical). The
source must not draw from the global RNGs (``tensorize`` does not: masking is hashed), since
the thread would interleave those draws with the model's dropout.

On CUDA the batch's tensors are pinned (page-locked) on the thread, so that the training
thread's ``.to(device, non_blocking=True)`` is an asynchronous copy.

Errors. An exception raised while preparing a batch is re-raised in the training thread, the
same object with its original type, message and traceback, when the batch it stopped would have
come. Leaving the ``with`` block (the epoch ends, an exception or KeyboardInterrupt in the step)
stops the thread and waits for it: no thread outlives its epoch.
"""
from __future__ import annotations

import queue
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Optional

import torch

_END = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def pin(batch: Any) -> Any:
    """``batch`` with every tensor in page-locked memory (dicts, lists, tuples and objects with a
    ``pin_memory()`` method, such as ``LatticeBatch``, walked into)."""
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory()
    if isinstance(batch, dict):
        return {k: pin(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(pin(v) for v in batch)
    if callable(getattr(batch, "pin_memory", None)):
        return batch.pin_memory()
    return batch


class Prefetcher:
    """Iterates ``source`` on a thread, up to ``depth`` items ahead, each passed through
    ``prepare`` there (``pin`` for CUDA). Use as a context manager: ``close()`` stops the thread."""

    def __init__(self, source: Iterable, depth: int = 2, prepare: Optional[Callable[[Any], Any]] = None,
                 name: str = "multigrain-prefetch"):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._source = source
        self._prepare = prepare
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name=name, daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        """Waits for room in the queue; False when asked to stop meanwhile."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._source:
                if self._prepare is not None:
                    item = self._prepare(item)
                if not self._put(item):
                    return
        except BaseException as e:  # surfaces in the consumer, where the batch was awaited
            self._put(_Failure(e))
            return
        finally:
            close = getattr(self._source, "close", None)
            if callable(close):  # a generator's own finally blocks run on this thread
                close()
        self._put(_END)

    def __iter__(self) -> Iterator:
        while True:
            item = self._get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                self.close()
                raise item.error
            yield item

    def _get(self) -> Any:
        while True:
            try:
                return self._queue.get(timeout=0.1)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("the prefetching thread ended without a result") from None

    def close(self) -> None:
        """Stop the producer and wait for it (it stops at its next batch boundary)."""
        self._stop.set()
        while self._thread.is_alive():
            try:  # unblock a producer waiting for room
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)

    def __enter__(self) -> "Prefetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def prefetched(source: Iterable, depth: int = 2, prepare: Optional[Callable[[Any], Any]] = None) -> Iterator[Iterable]:
    """``source`` prepared ahead on a thread by a ``Prefetcher`` (``depth`` 0: iterated here, as
    is, ``prepare`` applied here)."""
    if depth <= 0:
        yield source if prepare is None else map(prepare, source)
        return
    with Prefetcher(source, depth, prepare) as items:
        yield items
