"""A pre-training corpus: texts from several sources read lazily in a fixed order, cut into
pieces of at most ``max_chars_per_text`` (default 62) characters, paired for sentence order prediction.

``text_corpus`` reads ``sources`` (each a registered reader over a data file and the char-list
fields of its instances that are text, or plain text files, one text per line, glob patterns
allowed) under the directory given as the data path, in the order listed; within a plain-text
glob the files are taken in sorted order. A text longer than ``max_chars_per_text`` is cut at the
last sentence end (。！？!?；;) inside the window, else at the window. Consecutive identical texts
of one source are read once (an MRC file repeats its context for every question).

Instances: with ``pairs`` (default) two consecutive pieces of one source file, ``chars`` then
``chars_b`` (pieces 2i and 2i+1; an odd last piece is dropped), for SOP; else one piece,
``chars``. With a ``lattice_builder`` each char-list field gets its lattice (``lattice``,
``lattice_b``), built in chunks as the instances stream by (no cache: the corpus is read once).
``split`` (``train``/``dev``/``all``) keeps instances by a stable hash of their text (``dev``:
``dev_fraction`` of them); ``num_shards``/``shard_index`` keep every k-th instance of the split
(instance i goes to shard ``i % k``): k readers partition the split. ``max_chars`` stops after
that many characters (summed over the kept instances): the character budget of a pre-training.

The default corpus (every Chinese text under ../shared/data that is not a dev or test split,
``jsonnet_configs/lib/lattice_bert.libsonnet``), in this order, with the character tokens this
reader reads from each (pieces of at most 62, a run of Latin letters/digits one token; counted
by ``benchmarks/lattice_bert.py --count-corpus``, table in benchmarks/RESULTS.md "Lattice-BERT"):

  source (reader)                                   field(s)            pieces      characters
  resume_ner/train.char.bmes (resume_ner)           chars                4,259         124,084
  weibo_ner/weiboNER_2nd_conll.train (weibo_ner)    chars                1,936          73,774
  msra_ner/train1.txt (msra_ner, split train)       chars               51,121       1,947,476
  chnsenticorp/train.tsv (chnsenticorp)             chars               22,915       1,019,614
  bq_corpus/train.txt (bq_corpus)                   chars_a, chars_b   200,229       2,341,553
  cmrc2018/cmrc2018_train.json (cmrc2018)           context_chars       24,067       1,122,648
  tatoeba_cmn_eng/cmn.txt (tatoeba, split train)    chars (Chinese)     26,097         253,730
  tvsub_zh_en/train/*.zh (plain text)               lines              424,615       3,926,291
  total                                                                755,239      10,809,170

(THUCNews has no training file here; MSRA's split ``train`` leaves out the 10% its fine-tuning
spec validates on; Tatoeba's ``train`` leaves out its dev and test hash buckets.)
"""
from __future__ import annotations

import glob
import os
import re
from itertools import islice
from typing import Iterator, Literal, Optional, Sequence

from multigrain.components.lattice.builder import LatticeBuilder
from multigrain.components.readers.files import in_fraction, read_lines
from multigrain.components.readers.raw_text import check_shards
from multigrain.components.text import piece_bounds, split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Reader

#: instances per lattice-building call
CHUNK = 2048


class CorpusSource:
    """One source of a corpus: ``path`` (relative to the corpus directory; for plain text a glob
    pattern may match several files) read by ``reader`` (a registered reader; its instances'
    ``fields`` are the texts), or plain text one text per line when ``reader`` is None."""

    def __init__(self, path: str, reader: Optional[Reader] = None, fields: Sequence[str] = ("chars",)):
        if not fields:
            raise ConfigurationError("a corpus source needs at least one field")
        self.path, self.reader, self.fields = path, reader, list(fields)

    def files(self, root: str) -> list[str]:
        full = os.path.join(root, self.path)
        found = sorted(glob.glob(full), key=_natural) if self.reader is None and glob.has_magic(full) else [full]
        missing = [f for f in found if not os.path.isfile(f)]
        if not found or missing:
            raise DataError(missing[0] if missing else full, None, "no such file (a corpus source)")
        return found

    def texts(self, root: str, keep_latin_words: bool) -> Iterator[tuple[str, int, list[str]]]:
        """``(file, line, characters)`` of every text, in order."""
        for path in self.files(root):
            if self.reader is None:
                for number, line in read_lines(path):
                    if line.strip():
                        yield path, number, split_chars(line.strip(), keep_latin_words)
                continue
            for instance in self.reader.read(path):
                for field in self.fields:
                    if field not in instance:
                        raise DataError(path, instance.source[1] if instance.source else None,
                                        f"the {type(self.reader).__name__} instance has no field {field!r} "
                                        f"(it has {', '.join(instance.keys())})")
                    yield path, instance.source[1] if instance.source else None, list(instance[field])


def _natural(path: str):
    """Sort key: digit runs compared as numbers (episode 10 after episode 9)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def pieces(chars: list[str], limit: int) -> Iterator[list[str]]:
    """``chars`` cut into pieces of at most ``limit``, each ending at a sentence end if the window has one."""
    for start, end in piece_bounds(chars, limit):
        yield chars[start:end]


@Reader.register("text_corpus")
class TextCorpusReader(Reader):
    """See the module docstring. ``read(path)``: ``path`` is the directory the sources are under."""

    def __init__(self, sources: list[CorpusSource], lattice_builder: Optional[LatticeBuilder] = None,
                 pairs: bool = True, max_chars_per_text: int = 62, min_chars: int = 2,
                 split: Literal["all", "train", "dev"] = "all", dev_fraction: float = 0.01,
                 num_shards: int = 1, shard_index: int = 0, max_chars: Optional[int] = None,
                 max_instances: Optional[int] = None, keep_latin_words: bool = True):
        if not sources:
            raise ConfigurationError("text_corpus needs at least one source")
        if max_chars_per_text < 1 or min_chars < 1:
            raise ConfigurationError("max_chars_per_text and min_chars must be >= 1")
        if split not in ("all", "train", "dev") or not 0.0 <= dev_fraction <= 1.0:
            raise ConfigurationError(f"split must be all, train or dev and dev_fraction in [0, 1]; got {split!r}, "
                                     f"{dev_fraction}")
        check_shards(num_shards, shard_index)
        self.sources, self.lattice_builder, self.pairs = sources, lattice_builder, pairs
        self.max_chars_per_text, self.min_chars = max_chars_per_text, min_chars
        self.split, self.dev_fraction = split, dev_fraction
        self.num_shards, self.shard_index = num_shards, shard_index
        self.max_chars, self.max_instances, self.keep_latin_words = max_chars, max_instances, keep_latin_words

    def source_pieces(self, root: str, source: CorpusSource) -> Iterator[tuple[str, int, list[str]]]:
        """``(file, line, piece)`` of one source, duplicates of the previous text dropped."""
        previous = None
        for path, line, chars in source.texts(root, self.keep_latin_words):
            if chars == previous:
                continue
            previous = chars
            for piece in pieces(chars, self.max_chars_per_text):
                if len(piece) >= self.min_chars:
                    yield path, line, piece

    def _instances(self, root: str) -> Iterator[Instance]:
        """Every instance of the corpus in order, before split, shards and budget."""
        for source in self.sources:
            held = None
            for path, line, piece in self.source_pieces(root, source):
                if not self.pairs:
                    yield Instance({"chars": piece}, source=(path, line))
                elif held is None or held[0] != path:  # pairs never cross a file
                    held = (path, line, piece)
                else:
                    yield Instance({"chars": held[2], "chars_b": piece}, source=(path, held[1]))
                    held = None

    def _kept(self, root: str) -> Iterator[Instance]:
        index = chars = kept = 0
        for instance in self._instances(root):
            if self.split != "all":
                dev = in_fraction("".join(instance["chars"]), 0.0, self.dev_fraction)
                if dev != (self.split == "dev"):
                    continue
            index += 1
            if (index - 1) % self.num_shards != self.shard_index:
                continue
            size = len(instance["chars"]) + len(instance.get("chars_b", ()))
            if self.max_chars is not None and chars + size > self.max_chars:
                return
            if self.max_instances is not None and kept >= self.max_instances:
                return
            chars += size
            kept += 1
            yield instance

    def read(self, path: str) -> Iterator[Instance]:
        path = str(path)
        if not os.path.isdir(path):
            raise DataError(path, None, "text_corpus reads a directory (the corpus sources are relative to it)")
        instances = self._kept(path)
        if self.lattice_builder is None:
            yield from instances
            return
        fields = {"chars": "lattice", "chars_b": "lattice_b"}
        while True:
            chunk = list(islice(instances, CHUNK))
            if not chunk:
                return
            texts = [(i, f) for i, x in enumerate(chunk) for f in fields if f in x]
            built = self.lattice_builder.build_many([chunk[i][f] for i, f in texts])
            for (i, f), lattice in zip(texts, built):
                chunk[i][fields[f]] = lattice
            yield from chunk

    def annotate(self, instances: list[Instance]) -> list[Instance]:
        if self.lattice_builder is not None:
            for field, lattice_field in {"chars": "lattice", "chars_b": "lattice_b"}.items():
                todo = [x for x in instances if field in x and lattice_field not in x]
                for x, lattice in zip(todo, self.lattice_builder.build_many([x[field] for x in todo])):
                    x[lattice_field] = lattice
        return instances
