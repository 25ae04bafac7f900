"""Length-bucketed batching with per-batch padding and deterministic, resumable order."""
from __future__ import annotations

from array import array
from itertools import chain
from typing import Annotated, Callable, Iterator, Optional, Sequence, Union

import torch

from multigrain.platform.hints import Range


_SIGNED_INTS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # by an array's itemsize


def _one_signed_type(rows: Sequence) -> bool:
    return all(isinstance(r, array) for r in rows) and len({r.typecode for r in rows}) == 1 \
        and rows[0].typecode in "bhilq"


def joined_ids(rows: Sequence[array]) -> torch.Tensor:
    """The ids of ``rows`` (``array.array`` of one signed type code), end to end, as a LongTensor:
    one copy of their bytes, without a Python int per id."""
    if not _one_signed_type(rows):
        raise TypeError("joined_ids: rows must be array.array of one signed type code (b, h, i, l or q)")
    data = bytearray(b"".join(rows))
    if not data:
        return torch.zeros(0, dtype=torch.long)
    return torch.frombuffer(data, dtype=_SIGNED_INTS[rows[0].itemsize]).long()


def length_mask(lengths: Sequence[int]) -> torch.Tensor:
    """``[B, longest]`` bool (at least 1 wide): True at the first ``lengths[b]`` positions of row b."""
    return torch.arange(max(1, max(lengths, default=0))) < torch.tensor(lengths, dtype=torch.long).reshape(-1, 1)


def pad_ids(rows: Sequence[Sequence[int]], value: int = 0) -> torch.Tensor:
    """Ragged id lists -> LongTensor [len(rows), longest] padded with ``value`` (at least 1 wide).
    Lists and tuples of ints, or ``array.array`` rows of one signed type code, are joined into one
    tensor and scattered under a length mask (one conversion per batch, not one per row: building
    batches is host time, and on a GPU a step waits on it for the interpreter lock)."""
    lengths = [len(r) for r in rows]
    longest = max(lengths, default=0)
    out = torch.full((len(rows), max(1, longest)), value, dtype=torch.long)
    if not longest:
        return out
    real = length_mask(lengths)
    if all(isinstance(r, (list, tuple)) for r in rows):
        out[real] = torch.tensor(list(chain.from_iterable(rows)), dtype=torch.long)  # row-major, as the mask
        return out
    if _one_signed_type(rows):
        out[real] = joined_ids(rows)
        return out
    for i, r in enumerate(rows):  # tensors or arrays
        if lengths[i]:
            out[i, : lengths[i]] = torch.as_tensor(r, dtype=torch.long)
    return out


class DataLoaderConfig:
    """The ``data_loader`` section of a spec."""

    def __init__(self, batch_size: Annotated[int, Range(1)] = 32, shuffle: bool = True,
                 bucket_noise: Annotated[float, Range(0.0, 1.0, high_open=True)] = 0.1,
                 max_tokens: Optional[Annotated[int, Range(1)]] = None,
                 eval_batch_size: Optional[Annotated[int, Range(1)]] = None):
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.bucket_noise = bucket_noise
        self.max_tokens = max_tokens
        self.eval_batch_size = eval_batch_size or batch_size


Length = Union[int, Sequence[int]]


def bucket_batches(lengths: Sequence[Length], batch_size: int, shuffle: bool, seed: int, epoch: int,
                   noise: float = 0.1, max_tokens: Optional[int] = None) -> list[list[int]]:
    """Indices grouped into batches of similar length.

    ``lengths[i]`` is an example's length, or its per-field lengths (``(source, target)``): the
    sort key is their sum, and with ``max_tokens`` a batch of n examples holds at most
    ``n * sum_f max_i lengths[i][f] <= max_tokens`` tokens, padding counted (an example costlier
    than that alone makes a batch of one; ``BatchIterator`` refuses such data).

    With ``shuffle`` the order depends only on ``(seed, epoch)``: lengths are jittered by up
    to ``noise`` (relative), sorted, cut into batches, and the batches shuffled. Resuming at
    an epoch therefore reproduces the same batches without saving sampler state, and the
    batches do not depend on how many data-parallel replicas later slice them.
    """
    n = len(lengths)
    fields = [tuple(x) if isinstance(x, (tuple, list)) else (x,) for x in lengths]
    lens = torch.tensor([sum(f) for f in fields], dtype=torch.float64)
    if shuffle:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        jitter = 1.0 + noise * (2 * torch.rand(n, generator=g, dtype=torch.float64) - 1)
        order = torch.argsort(lens * jitter, stable=True).tolist()
    else:
        g = None
        order = torch.argsort(lens, stable=True).tolist()
    batches: list[list[int]] = []
    current: list[int] = []
    longest: tuple[int, ...] = ()
    for i in order:
        longest_if = tuple(map(max, longest, fields[i])) if current else fields[i]
        too_many = len(current) >= batch_size
        too_big = max_tokens is not None and current and sum(longest_if) * (len(current) + 1) > max_tokens
        if current and (too_many or too_big):
            batches.append(current)
            current, longest_if = [], fields[i]
        current.append(i)
        longest = longest_if
    if current:
        batches.append(current)
    if shuffle:
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[p] for p in perm]
    return batches


class BatchIterator:
    """Iterates tensorized batches of ``instances`` for one epoch.

    ``length(instance)``: the length an example is bucketed by, an int, or a tuple of per-field
    lengths (a translator's ``(source, target)``) when its fields are padded separately; then
    ``max_tokens`` counts every field's padding (``bucket_batches``). With ``max_tokens`` an
    example that alone costs more is a ConfigurationError naming both numbers and the example's
    file and line (truncation happens in ``length``: a model that cuts its inputs reports the cut
    length, so only an example still too long after the cut is refused)."""

    def __init__(self, instances: list, tensorize: Callable[[list], dict], length: Callable[[object], Length],
                 batch_size: int, shuffle: bool, seed: int = 0, noise: float = 0.1,
                 max_tokens: Optional[int] = None):
        self.instances = instances
        self.tensorize = tensorize
        self.lengths = [length(x) for x in instances]
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.noise = noise
        self.max_tokens = max_tokens
        self._cached: tuple[int, list[list[int]]] | None = None
        if self.lengths:
            self._check_lengths()

    def _check_lengths(self) -> None:
        from multigrain.platform.errors import ConfigurationError

        arity = {len(x) if isinstance(x, (tuple, list)) else 0 for x in self.lengths}
        if len(arity) > 1:
            raise ValueError(f"instance lengths mix ints and tuples of {sorted(arity)} fields")
        if self.max_tokens is None:
            return
        costs = [sum(x) if isinstance(x, (tuple, list)) else x for x in self.lengths]
        worst = max(range(len(costs)), key=costs.__getitem__)
        if costs[worst] > self.max_tokens:
            example = self.instances[worst]
            where = example.where() if callable(getattr(example, "where", None)) else f"example {worst + 1}"
            fields = f" ({' + '.join(map(str, self.lengths[worst]))})" if arity != {0} else ""
            raise ConfigurationError(
                f"data_loader.max_tokens: {self.max_tokens} tokens per batch, and the training example at "
                f"{where} alone has {costs[worst]}{fields}; set max_tokens to at least {costs[worst]}, or "
                f"shorten the examples (a model's max length with truncation)")

    def batches(self, epoch: int) -> list[list[int]]:
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, bucket_batches(self.lengths, self.batch_size, self.shuffle, self.seed, epoch,
                                                  self.noise, self.max_tokens))
        return self._cached[1]

    def num_batches(self, epoch: int = 0) -> int:
        return len(self.batches(epoch))

    def epoch(self, epoch: int, start: int = 0) -> Iterator[tuple[list, dict]]:
        """The epoch's batches from the ``start``-th (those before it are not built)."""
        for idx in self.batches(epoch)[start:]:
            chunk = [self.instances[i] for i in idx]
            yield chunk, self.tensorize(chunk)

    def epoch_parts(self, epoch: int, part: Callable[[list[int]], tuple[list[int], float]]) -> Iterator[tuple[dict, float]]:
        """The same batches as ``epoch``, each cut by ``part`` (a data-parallel replica's slice of
        the indices and its share of the batch): ``(tensorized slice, share)``."""
        for idx in self.batches(epoch):
            mine, share = part(idx)
            yield self.tensorize([self.instances[i] for i in mine]), share
