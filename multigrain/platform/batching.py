"""Length-bucketed batching with per-batch padding and deterministic, resumable order."""
from __future__ import annotations

from typing import Annotated, Callable, Iterator, Optional, Sequence

import torch

from multigrain.platform.hints import Range


def pad_ids(rows: list[list[int]], value: int = 0) -> torch.Tensor:
    """Ragged id lists -> LongTensor [len(rows), longest] padded with ``value`` (at least 1 wide)."""
    longest = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), max(1, longest)), value, dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            out[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
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


def bucket_batches(lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int, epoch: int,
                   noise: float = 0.1, max_tokens: Optional[int] = None) -> list[list[int]]:
    """Indices grouped into batches of similar length.

    With ``shuffle`` the order depends only on ``(seed, epoch)``: lengths are jittered by up
    to ``noise`` (relative), sorted, cut into batches, and the batches shuffled. Resuming at
    an epoch therefore reproduces the same batches without saving sampler state.
    """
    n = len(lengths)
    lens = torch.tensor(list(lengths), dtype=torch.float64)
    if shuffle:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        jitter = 1.0 + noise * (2 * torch.rand(n, generator=g, dtype=torch.float64) - 1)
        order = torch.argsort(lens * jitter, stable=True).tolist()
    else:
        g = None
        order = torch.argsort(lens, stable=True).tolist()
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        longest_if = max(longest, lengths[i])
        too_many = len(current) >= batch_size
        too_big = max_tokens is not None and current and longest_if * (len(current) + 1) > max_tokens
        if current and (too_many or too_big):
            batches.append(current)
            current, longest_if = [], lengths[i]
        current.append(i)
        longest = longest_if
    if current:
        batches.append(current)
    if shuffle:
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[p] for p in perm]
    return batches


class BatchIterator:
    """Iterates tensorized batches of ``instances`` for one epoch."""

    def __init__(self, instances: list, tensorize: Callable[[list], dict], length: Callable[[object], int],
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

    def batches(self, epoch: int) -> list[list[int]]:
        return bucket_batches(self.lengths, self.batch_size, self.shuffle, self.seed, epoch, self.noise, self.max_tokens)

    def num_batches(self, epoch: int = 0) -> int:
        return len(self.batches(epoch))

    def epoch(self, epoch: int) -> Iterator[tuple[list, dict]]:
        for idx in self.batches(epoch):
            chunk = [self.instances[i] for i in idx]
            yield chunk, self.tensorize(chunk)

    def epoch_parts(self, epoch: int, part: Callable[[list[int]], tuple[list[int], float]]) -> Iterator[tuple[dict, float]]:
        """The same batches as ``epoch``, each cut by ``part`` (a data-parallel replica's slice of
        the indices and its share of the batch): ``(tensorized slice, share)``."""
        for idx in self.batches(epoch):
            mine, share = part(idx)
            yield self.tensorize([self.instances[i] for i in mine]), share
