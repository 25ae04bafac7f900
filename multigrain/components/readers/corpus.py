"""A pre-training corpus: texts from several sources read lazily in a fixed order, cut into
pieces of at most ``max_chars_per_text`` (default 62) characters, paired within one text for
sentence order prediction (SOP).

``text_corpus`` reads ``sources`` (each a registered reader over a data file and the char-list
fields of its instances that are text, or plain text files, one text per line, glob patterns
allowed) under the directory given as the data path, in the order listed; within a plain-text
glob the files are taken in sorted order. A text longer than ``max_chars_per_text`` is cut at the
last sentence end (。！？!?；;) inside the window, else at the window. Consecutive identical texts
of one source are read once (an MRC file repeats its context for every question).

Instances: with ``pairs`` (default) an SOP pair, ``chars`` then ``chars_b``, whose order is the
order of one text: two consecutive pieces of a long text (pieces 2i and 2i+1); a text's odd last
piece, or a text of one piece, is cut in two halves (after the sentence end 。！？!?；; nearest
the middle, else the clause mark ，,、：: nearest it, else at the middle; neither half shorter
than a quarter of it) when each half keeps at least ``min_sop_chars`` (default 8) characters.
A shorter piece is an instance of its own, ``chars`` without ``chars_b``: it trains MSP only.
Two texts of a source are never paired (consecutive reviews, questions or NER sentences are
unrelated: their order cannot be learnt), except in a ``document`` source, whose texts are the
consecutive sentences of one document per file (the subtitle lines of an episode): there two
consecutive pieces of a file form a pair, as the halves of a text do. A source that yields no
pair (every text too short to halve: BQ questions, Tatoeba sentences) trains MSP only; one line
per source on stderr says how its pieces were paired (``sop_stats`` keeps the counts). Without
``pairs`` every piece is one instance, ``chars``.

With a ``lattice_builder`` each char-list field gets its lattice (``lattice``, ``lattice_b``),
built in chunks as the instances stream by (no cache: the corpus is read once), a progress stage.
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

SOP pairs of each source (of consecutive pieces + halves; pieces without a pair), before the
dev split: Resume 388 + 2,627 (856), Weibo 438 + 924 (136), MSRA 8,527 + 33,176 (891),
ChnSentiCorp 8,537 + 5,571 (270), BQ 244 + 38,694 (161,047), CMRC 2018 11,425 + 1,092 (125),
Tatoeba 0 + 1,563 (24,534), TV subtitles (a document) 212,163 + 10 (279): 325,379 pairs and
188,138 single texts, 508,576 instances in the split ``train``.
"""
from __future__ import annotations

import glob
import os
import re
from collections import Counter
from itertools import islice
from typing import Iterator, Literal, Optional, Sequence

from multigrain.components.lattice.builder import LatticeBuilder
from multigrain.components.readers.files import in_fraction, read_lines
from multigrain.components.readers.raw_text import check_shards
from multigrain.components.text import SENTENCE_END, piece_bounds, split_chars
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Reader
from multigrain.platform.progress import Stage, note

#: instances per lattice-building call
CHUNK = 2048
#: where a text without a sentence end near its middle is halved, if it has one of these there
CLAUSE_MARK = re.compile(r"[，,、：:]")
#: the (source path, settings) whose pairing line this process printed (a dev reader reads them again)
_NOTED: set = set()


class CorpusSource:
    """One source of a corpus: ``path`` (relative to the corpus directory; for plain text a glob
    pattern may match several files) read by ``reader`` (a registered reader; its instances'
    ``fields`` are the texts), or plain text one text per line when ``reader`` is None. With
    ``document`` the texts of a file, in order, are the consecutive sentences of one document
    (pairs for sentence order prediction may then join two of them; see the module docstring)."""

    def __init__(self, path: str, reader: Optional[Reader] = None, fields: Sequence[str] = ("chars",),
                 document: bool = False):
        if not fields:
            raise ConfigurationError("a corpus source needs at least one field")
        self.path, self.reader, self.fields, self.document = path, reader, list(fields), document

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
    return [int(t) if i % 2 else t for i, t in enumerate(re.split(r"([0-9]+)", path))]


def pieces(chars: list[str], limit: int) -> Iterator[list[str]]:
    """``chars`` cut into pieces of at most ``limit``, each ending at a sentence end if the window has one."""
    for start, end in piece_bounds(chars, limit):
        yield chars[start:end]


def halving_cut(chars: Sequence[str], min_half: int) -> Optional[int]:
    """Where to cut ``chars`` in two halves of at least ``min_half`` characters (the first half is
    ``chars[:cut]``): after the sentence end nearest the middle, else after the clause mark nearest
    it, else at the middle; a cut at a mark leaves each half at least a quarter of the text. None
    when the text is shorter than ``2 * min_half``."""
    n = len(chars)
    if n < 2 * max(1, min_half):
        return None
    low, high = max(min_half, n // 4), min(n - min_half, n - n // 4)
    for mark in (SENTENCE_END, CLAUSE_MARK):
        cuts = [i + 1 for i in range(low - 1, high) if mark.fullmatch(chars[i])]
        if cuts:
            return min(cuts, key=lambda cut: (abs(2 * cut - n), cut))
    return n // 2


@Reader.register("text_corpus")
class TextCorpusReader(Reader):
    """See the module docstring. ``read(path)``: ``path`` is the directory the sources are under."""

    def __init__(self, sources: list[CorpusSource], lattice_builder: Optional[LatticeBuilder] = None,
                 pairs: bool = True, max_chars_per_text: int = 62, min_chars: int = 2, min_sop_chars: int = 8,
                 split: Literal["all", "train", "dev"] = "all", dev_fraction: float = 0.01,
                 num_shards: int = 1, shard_index: int = 0, max_chars: Optional[int] = None,
                 max_instances: Optional[int] = None, keep_latin_words: bool = True):
        if not sources:
            raise ConfigurationError("text_corpus needs at least one source")
        if max_chars_per_text < 1 or min_chars < 1 or min_sop_chars < 1:
            raise ConfigurationError("max_chars_per_text, min_chars and min_sop_chars must be >= 1")
        if split not in ("all", "train", "dev") or not 0.0 <= dev_fraction <= 1.0:
            raise ConfigurationError(f"split must be all, train or dev and dev_fraction in [0, 1]; got {split!r}, "
                                     f"{dev_fraction}")
        check_shards(num_shards, shard_index)
        self.sources, self.lattice_builder, self.pairs = sources, lattice_builder, pairs
        self.max_chars_per_text, self.min_chars, self.min_sop_chars = max_chars_per_text, min_chars, min_sop_chars
        #: per source path, how its pieces were paired: texts, consecutive (pairs of two pieces),
        #: halved (pairs of the halves of one piece), single (pieces without a pair)
        self.sop_stats: dict[str, Counter] = {}
        self.split, self.dev_fraction = split, dev_fraction
        self.num_shards, self.shard_index = num_shards, shard_index
        self.max_chars, self.max_instances, self.keep_latin_words = max_chars, max_instances, keep_latin_words

    def source_texts(self, root: str, source: CorpusSource) -> Iterator[tuple[str, int, list[list[str]]]]:
        """``(file, line, pieces)`` of every text of one source, duplicates of the previous text dropped."""
        previous = None
        for path, line, chars in source.texts(root, self.keep_latin_words):
            if chars == previous:
                continue
            previous = chars
            yield path, line, [p for p in pieces(chars, self.max_chars_per_text) if len(p) >= self.min_chars]

    def source_pieces(self, root: str, source: CorpusSource) -> Iterator[tuple[str, int, list[str]]]:
        """``(file, line, piece)`` of one source, duplicates of the previous text dropped."""
        for path, line, cut in self.source_texts(root, source):
            for piece in cut:
                yield path, line, piece

    def _pairs(self, root: str, source: CorpusSource, stats: Counter) -> Iterator[Instance]:
        """The instances of one source with ``pairs`` (see the module docstring)."""
        def leftover(path, line, piece) -> Instance:
            cut = halving_cut(piece, self.min_sop_chars)
            stats["halved" if cut else "single"] += 1
            fields = {"chars": piece[:cut], "chars_b": piece[cut:]} if cut else {"chars": piece}
            return Instance(fields, source=(path, line))

        held = None  # a document's piece waiting for the next one of its file
        for path, line, cut in self.source_texts(root, source):
            stats["texts"] += 1
            if source.document:
                for piece in cut:
                    if held is not None and held[0] != path:  # pairs never cross a file
                        yield leftover(*held)
                        held = None
                    if held is None:
                        held = (path, line, piece)
                    else:
                        stats["consecutive"] += 1
                        yield Instance({"chars": held[2], "chars_b": piece}, source=(path, held[1]))
                        held = None
                continue
            for i in range(0, len(cut) - 1, 2):
                stats["consecutive"] += 1
                yield Instance({"chars": cut[i], "chars_b": cut[i + 1]}, source=(path, line))
            if len(cut) % 2:
                yield leftover(path, line, cut[-1])
        if held is not None:
            yield leftover(*held)

    def _note(self, source: CorpusSource, stats: Counter) -> None:
        """One line on how a source's pieces were paired (once per process and settings)."""
        key = (source.path, source.document, self.max_chars_per_text, self.min_chars, self.min_sop_chars)
        if key in _NOTED:
            return
        _NOTED.add(key)
        pairs = stats["consecutive"] + stats["halved"]
        if pairs == 0:
            note(f"text_corpus: {source.path}: no sentence order pairs (every text is one piece under "
                 f"{2 * self.min_sop_chars} characters, too short to halve): its {stats['single']:,} pieces train "
                 f"MSP only")
            return
        note(f"text_corpus: {source.path}: {stats['texts']:,} texts -> {pairs:,} sentence order pairs "
             f"({stats['consecutive']:,} of two consecutive pieces, {stats['halved']:,} halved pieces), "
             f"{stats['single']:,} pieces without a pair (MSP only)")

    def _instances(self, root: str) -> Iterator[Instance]:
        """Every instance of the corpus in order, before split, shards and budget."""
        for source in self.sources:
            if not self.pairs:
                for path, line, piece in self.source_pieces(root, source):
                    yield Instance({"chars": piece}, source=(path, line))
                continue
            stats = self.sop_stats[source.path] = Counter()
            yield from self._pairs(root, source, stats)
            self._note(source, stats)  # the source read to its end

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
        with Stage(f"reading the corpus, {self.lattice_builder.stage_name}", unit="instances") as stage:
            while True:
                chunk = list(islice(instances, CHUNK))
                if not chunk:
                    return
                texts = [(i, f) for i, x in enumerate(chunk) for f in fields if f in x]
                built = self.lattice_builder.build_many([chunk[i][f] for i, f in texts])
                for (i, f), lattice in zip(texts, built):
                    chunk[i][fields[f]] = lattice
                stage.update(len(chunk))
                yield from chunk

    def annotate(self, instances: list[Instance]) -> list[Instance]:
        if self.lattice_builder is not None:
            for field, lattice_field in {"chars": "lattice", "chars_b": "lattice_b"}.items():
                todo = [x for x in instances if field in x and lattice_field not in x]
                for x, lattice in zip(todo, self.lattice_builder.build_many([x[field] for x in todo])):
                    x[lattice_field] = lattice
        return instances
