"""Sentence classification, and what every sentence model shares (``SentenceModel``).

A sentence model packs its texts BERT-style — ``[CLS] a [SEP]`` (classification), ``[CLS] a
[SEP] b [SEP]`` (pairs), ``[CLS] question [SEP] context-window [SEP]`` (MRC) — with segment ids
0 up to and including the first ``[SEP]`` and 1 after, and runs

    embedder (a backbone: char_transformer, hf_transformer, or char embeddings)
      -> encoder (optional layer on the backbone's output: mwa, hrmf, big, ...)
      -> head (classifier, span).

Lattices: when the instances carry them (``lattice``, ``lattice_a``/``lattice_b``), the model
packs them the same way, so the batch's ``LatticeBatch`` covers the packed sequence, ``[CLS]``
at character position 0. Special tokens (and texts without a lattice, such as an MRC question)
are one segment per position in every segmentation and carry no word. The batch then also has
``seg_words [B, S, W]``: the ``seg_words`` vocabulary id of every segment (0 for special
tokens and padding), which HRMF reads its word vectors with.

Bigrams: with an embedder that reads them (``char_bigram`` with ``bigram_dim`` > 0) the batch
also has ``bigrams [B, n]``: each text character's forward bigram ``c_i c_{i+1}`` within its own
text (the last paired with an end marker, as the tagger's), 0 (padding) at special tokens.

Over-long inputs: ``max_length`` counts every packed position. With ``truncate`` (default) a
text is cut at the end (pairs: longest first, the first text keeping the odd position); with
``truncate: false`` an over-long example is a DataError naming its file and line.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import torch

from multigrain.components.heads.classifier import ClassifierHead
from multigrain.components.lattice.types import Lattice, LatticeBatch
from multigrain.components.metrics.accuracy import Accuracy
from multigrain.components.models.tagger import bigrams_of
from multigrain.components.readers.text import split_chars
from multigrain.platform.batching import pad_ids
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Encoder, Head, Model, TokenEmbedder
from multigrain.platform.vocab import Vocabulary

CLS, SEP = "[CLS]", "[SEP]"


# ------------------------------------------------------------------------------------- packing
@dataclass(frozen=True)
class Part:
    """Characters ``chars[lo:hi]`` of one text and its lattice (or None)."""

    chars: Sequence[str]
    lattice: Optional[Lattice]
    lo: int = 0
    hi: Optional[int] = None

    @property
    def end(self) -> int:
        return len(self.chars) if self.hi is None else self.hi


@dataclass
class Packed:
    tokens: list[str]
    segments: list[int]
    special: list[bool]
    lattice: Optional[Lattice]
    bigrams: Optional[list[Optional[str]]] = None  # per position; None at special tokens


def pack(pieces: Sequence[Union[str, Part]], second_segment_after: int = 1) -> Packed:
    """Concatenate special tokens (strings) and text parts into one sequence and one lattice.

    Segment id 0 until the ``second_segment_after``-th ``[SEP]`` included, 1 after. A part's
    words are kept when they lie inside ``[lo, hi)``; its segmentation rows are cut to the slice
    and renumbered. The lattice is None when no part has one; ``seg_ids`` is None when no
    part's lattice has them.
    """
    tokens: list[str] = []
    segments: list[int] = []
    special: list[bool] = []
    bigrams: list[Optional[str]] = []
    seps = 0
    for piece in pieces:
        segment = 0 if seps < second_segment_after else 1
        if isinstance(piece, str):
            tokens.append(piece)
            special.append(True)
            segments.append(segment)
            seps += piece == SEP
            bigrams.append(None)
        else:
            chunk = list(piece.chars[piece.lo:piece.end])
            # one character past the slice, so its last bigram is the text's own (or the end marker)
            bigrams.extend(bigrams_of(list(piece.chars[piece.lo:piece.end + 1]))[:len(chunk)])
            tokens.extend(chunk)
            special.extend([False] * len(chunk))
            segments.extend([segment] * len(chunk))
    parts = [p for p in pieces if isinstance(p, Part)]
    if not any(p.lattice is not None for p in parts):
        return Packed(tokens, segments, special, None, bigrams)
    n_seg = max((p.lattice.seg_ids.shape[0] for p in parts if p.lattice is not None and p.lattice.seg_ids is not None),
                default=0)
    spans, texts, sources, seg_rows = [], [], [], []
    offset = 0
    next_segment = np.zeros(n_seg, dtype=np.int64)
    for piece in pieces:
        if isinstance(piece, str):
            length, lat, lo = 1, None, 0
        else:
            length, lat, lo = piece.end - piece.lo, piece.lattice, piece.lo
        if lat is not None and lat.n_words:
            n = lat.n_chars
            words = lat.spans[n:].astype(np.int64)
            keep = (words[:, 0] >= lo) & (words[:, 1] < lo + length)
            spans.append(words[keep] - lo + offset)
            texts.extend(t for t, k in zip(lat.token_text[n:], keep.tolist()) if k)
            sources.append(lat.sources[n:][keep])
        if n_seg:
            if lat is not None and lat.seg_ids is not None and length:
                if lat.seg_ids.shape[0] != n_seg:
                    raise ValueError(f"texts of one example have {lat.seg_ids.shape[0]} and {n_seg} segmentations")
                rows = lat.seg_ids[:, lo:lo + length]
                rows = rows - rows[:, :1]
            else:
                rows = np.broadcast_to(np.arange(length, dtype=np.int64), (n_seg, length))
            seg_rows.append(rows + next_segment[:, None])
            if length:
                next_segment = next_segment + rows[:, -1] + 1
        offset += length
    n_total = len(tokens)
    words = np.concatenate(spans) if spans else np.zeros((0, 2), dtype=np.int64)
    all_spans = np.concatenate([np.repeat(np.arange(n_total, dtype=np.int64)[:, None], 2, axis=1), words])
    all_sources = np.concatenate([np.zeros(n_total, dtype=np.int64)] + sources)
    seg = np.ascontiguousarray(np.concatenate(seg_rows, axis=1)) if n_seg else None
    lattice = Lattice(tuple(tokens), all_spans.astype(np.int32), tuple(tokens) + tuple(texts), all_sources, seg)
    return Packed(tokens, segments, special, lattice, bigrams)


def segment_texts(packed: Packed) -> list[list[Optional[str]]]:
    """Per segmentation row, the text of each segment (None for a special token's segment)."""
    out = []
    special = packed.special
    for row in packed.lattice.seg_ids:
        starts = np.flatnonzero(np.diff(row, prepend=-1)).tolist()
        bounds = zip(starts, starts[1:] + [len(row)])
        out.append([None if special[s] else "".join(packed.tokens[s:e]) for s, e in bounds])
    return out


def fit_lengths(lengths: list[int], budget: int) -> list[int]:
    """Longest-first truncation of one or two texts to ``budget`` positions in all."""
    if sum(lengths) <= budget:
        return list(lengths)
    if len(lengths) == 1:
        return [budget]
    a, b = lengths
    half = budget // 2
    if a <= half:
        return [a, budget - a]
    if b <= half:
        return [budget - b, b]
    return [budget - half, half]


# ------------------------------------------------------------------------------------- base
class SentenceModel(Model):
    """embedder -> optional encoder -> head over packed sequences (see the module docstring)."""

    #: char-list field -> its lattice field, in packing order
    text_fields: dict[str, str] = {"chars": "lattice"}

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, encoder: Optional[Lazy[Encoder]] = None,
                 max_length: int = 512, truncate: bool = True):
        super().__init__()
        self.vocab = vocab
        self.embedder = embedder
        self.encoder = encoder.construct(input_dim=embedder.get_output_dim(), vocab=vocab) if encoder else None
        self.output_dim = self.encoder.get_output_dim() if self.encoder else embedder.get_output_dim()
        self.max_length = max_length
        self.truncate = truncate
        backbone_limit = getattr(embedder, "max_length", None)
        if backbone_limit is not None and max_length > backbone_limit:
            raise ConfigurationError(f"model.max_length {max_length} exceeds the embedder's max_length "
                                     f"{backbone_limit}; lower it or enlarge the backbone")

    def _ids(self, tokens: list[str]) -> list[int]:
        """Token ids of the backbone: the embedder's own ``index`` when it has one (pretrained
        vocabularies), else the ``chars`` namespace."""
        index = getattr(self.embedder, "index", None)
        return index(tokens) if index is not None else self.vocab.indices("chars", tokens)

    # vocabulary ------------------------------------------------------------------------------
    @classmethod
    def count_vocab_items(cls, instance: Instance, counters: dict[str, Counter]) -> None:
        chars = counters.setdefault("chars", Counter())
        chars.update([CLS, SEP])
        for field, lattice_field in cls.text_fields.items():
            chars.update(instance[field])
            counters.setdefault("bigrams", Counter()).update(bigrams_of(list(instance[field])))
            lattice = instance.get(lattice_field)
            if lattice is None:
                continue
            counters.setdefault("words", Counter()).update(lattice.token_text[lattice.n_chars:])
            if lattice.seg_ids is not None:
                texts = segment_texts(Packed(list(lattice.chars), [], [False] * lattice.n_chars, lattice))
                counters.setdefault("seg_words", Counter()).update(t for row in texts for t in row)
        if "label" in instance:
            counters.setdefault("labels", Counter()).update([instance["label"]])

    # tensors ---------------------------------------------------------------------------------
    def lengths_within(self, instance: Instance, lengths: list[int], fixed: int) -> list[int]:
        """The text lengths after truncation to ``max_length`` (``fixed`` special positions)."""
        budget = self.max_length - fixed
        if sum(lengths) <= budget:
            return lengths
        if not self.truncate:
            raise DataError(*_where(instance), f"{sum(lengths) + fixed} positions with [CLS]/[SEP], more than "
                                               f"max_length {self.max_length} (truncate is off)")
        return fit_lengths(lengths, budget)

    def packed_tensors(self, packed: list[Packed]) -> dict[str, Any]:
        batch: dict[str, Any] = {
            "chars": pad_ids([self._ids(p.tokens) for p in packed]),
            "segments": pad_ids([p.segments for p in packed]),
            "mask": pad_ids([[1] * len(p.tokens) for p in packed]).bool(),
        }
        if getattr(self.embedder, "bigrams", None) is not None:
            v = self.vocab
            batch["bigrams"] = pad_ids([[0 if b is None else v.index("bigrams", b) for b in p.bigrams]
                                        for p in packed])
        has_lattice = [p.lattice is not None for p in packed]
        if any(has_lattice):
            if not all(has_lattice):
                raise ValueError("some examples of the batch have lattices and some do not")
            batch["lattice"] = LatticeBatch.collate([p.lattice for p in packed], self._lattice_token_id())
            if batch["lattice"].seg_ids is not None:
                batch["seg_words"] = self._segment_word_ids(packed)
        return batch

    def _lattice_token_id(self) -> Callable[[str, bool], int]:
        v = self.vocab
        has_words = v.size("words") > 0

        def token_to_id(token: str, is_char: bool) -> int:
            if is_char:
                return self._ids([token])[0]
            return v.index("words", token) if has_words else 1
        return token_to_id

    def _segment_word_ids(self, packed: list[Packed]) -> torch.Tensor:
        """``[B, S, W]``: seg_words id of each segment; 0 for special tokens and padding."""
        v = self.vocab
        known = v.size("seg_words") > 0
        rows = [[[0 if t is None else (v.index("seg_words", t) if known else 1) for t in row]
                 for row in segment_texts(p)] for p in packed]
        S = len(rows[0])
        W = max(len(r) for inst in rows for r in inst)
        out = torch.zeros(len(rows), S, W, dtype=torch.long)
        for b, inst in enumerate(rows):
            for s, r in enumerate(inst):
                out[b, s, : len(r)] = torch.as_tensor(r, dtype=torch.long)
        return out

    # computation -----------------------------------------------------------------------------
    def encode(self, chars: torch.Tensor, mask: torch.Tensor, batch: dict) -> torch.Tensor:
        """Backbone (+ encoder) states of the packed positions: [B, n, d]."""
        batch = dict(batch, chars=chars, mask=mask)
        embedded = self.embedder(**batch)
        if self.encoder is None:
            return embedded
        token_mask = batch["lattice"].mask if getattr(self.embedder, "uses_lattice", False) else mask
        return self.encoder(embedded, token_mask, batch)[:, : chars.shape[1]]


def _where(instance: Instance) -> tuple[str, Optional[int]]:
    return instance.source if instance.source else ("<input>", None)


# ------------------------------------------------------------------------------------- classifier
class LabelledModel(SentenceModel):
    """A SentenceModel predicting one label per example, scored by accuracy and macro F1."""

    leaderboard_metric = "accuracy"

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, encoder: Optional[Lazy[Encoder]] = None,
                 head: Optional[Lazy[Head]] = None, labels: Optional[list[str]] = None, max_length: int = 512,
                 truncate: bool = True):
        super().__init__(vocab, embedder, encoder, max_length, truncate)
        self.labels = list(labels) if labels else vocab.tokens("labels") if "labels" in vocab.namespaces() else []
        if not self.labels:
            raise ConfigurationError("model.labels: no labels given and none in the training data")
        self.label_index = {label: i for i, label in enumerate(self.labels)}
        self.head = (head.construct(input_dim=self.output_dim, labels=self.labels) if head
                     else ClassifierHead(self.output_dim, self.labels))
        self.metric = Accuracy()

    def label_ids(self, instances: list[Instance]) -> Optional[torch.Tensor]:
        if not all("label" in x for x in instances):
            return None
        ids = []
        for x in instances:
            i = self.label_index.get(x["label"])
            if i is None:
                raise DataError(*_where(x), f"label {x['label']!r} is not in the label set "
                                            f"({', '.join(self.labels)})")
            ids.append(i)
        return torch.tensor(ids, dtype=torch.long)

    def labelled_batch(self, packed: list[Packed], instances: list[Instance]) -> dict[str, Any]:
        """:meth:`packed_tensors` plus ``label`` [B] when every instance has a label."""
        batch = self.packed_tensors(packed)
        labels = self.label_ids(instances)
        if labels is not None:
            batch["label"] = labels
        return batch

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, label: Optional[torch.Tensor] = None,
                **batch) -> dict[str, torch.Tensor]:
        """chars, segments, mask [B, n]; label [B]; optional lattice and seg_words."""
        states = self.encode(chars, mask, batch)
        out = self.head(states, mask, label=label)
        if label is not None and not self.training:
            self.metric(out["predictions"].tolist(), label.tolist())
        return out

    def get_metrics(self, reset: bool = False) -> dict[str, float]:
        if reset:
            self._last_pairs = dict(self.metric.pairs)
        return self.metric.get_metric(reset)

    def confusion(self) -> dict:
        """Gold x predicted counts of the last completed evaluation: ``{"labels", "matrix"}``."""
        pairs = getattr(self, "_last_pairs", {})
        return {"labels": list(self.labels),
                "matrix": [[pairs.get((g, p), 0) for p in range(len(self.labels))] for g in range(len(self.labels))]}

    def predicted_labels(self, output: dict) -> list[dict]:
        probs = output["probs"].detach().cpu().tolist()
        return [{"label": self.labels[max(range(len(p)), key=p.__getitem__)],
                 "probs": dict(zip(self.labels, p))} for p in probs]


@Model.register("classifier")
class Classifier(LabelledModel):
    """Sentence classification over ``[CLS] text [SEP]`` (fields ``chars``, ``label``, ``lattice``)."""

    task = "cls"

    def instance_length(self, instance: Instance) -> int:
        return min(len(instance["chars"]) + 2, self.max_length)

    def tensorize(self, instances: list[Instance]) -> dict[str, Any]:
        packed = []
        for x in instances:
            (n,) = self.lengths_within(x, [len(x["chars"])], 2)
            packed.append(pack([CLS, Part(x["chars"], x.get("lattice"), 0, n), SEP]))
        return self.labelled_batch(packed, instances)

    def text_to_instance(self, data: dict) -> Instance:
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValueError('expected a non-empty "text"')
        inst = Instance({"text": text, "chars": split_chars(text)})
        if "label" in data:
            inst["label"] = str(data["label"])
        return inst

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        return [{"text": x.get("text", "".join(x["chars"])), **pred}
                for x, pred in zip(instances, self.predicted_labels(output))]
