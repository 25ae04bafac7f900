"""Unlabelled text, one example per line (e.g. for prediction or pre-training)."""
from __future__ import annotations

from typing import Iterator

from multigrain.components.readers.files import read_lines
from multigrain.components.readers.sentence import SentenceReader
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.kinds import Reader


def check_shards(num_shards: int, shard_index: int) -> None:
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ConfigurationError(f"need num_shards >= 1 and 0 <= shard_index < num_shards, got {num_shards}, "
                                 f"{shard_index}")


@Reader.register("raw_text")
class RawTextReader(SentenceReader):
    """One text (a sentence or a paragraph) per line, blank lines skipped -> fields ``text`` (the
    line as is) and ``chars``. Lazy. Deterministic shards: with ``num_shards`` k the reader keeps
    the non-blank lines whose 0-based index i has ``i % k == shard_index`` (k readers with
    indices 0..k-1 partition the file, each line read by exactly one)."""

    def __init__(self, num_shards: int = 1, shard_index: int = 0, **kwargs):
        super().__init__(**kwargs)
        check_shards(num_shards, shard_index)
        self.num_shards, self.shard_index = num_shards, shard_index

    def _read(self, path: str) -> Iterator[Instance]:
        index = 0
        for number, line in read_lines(path):
            if line.strip():
                if index % self.num_shards == self.shard_index:
                    yield Instance({"text": line, "chars": split_chars(line, self.keep_latin_words)},
                                   source=(path, number))
                index += 1
