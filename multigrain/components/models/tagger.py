"""Sequence tagging (NER): embedder -> encoder -> tagging head, scored by span F1.

Fields ``chars`` and ``tags`` (the NER readers) and optionally ``lattice``; the batch has
``chars``, ``bigrams`` and ``mask [B, n]``, ``tags`` when every instance has them, and the
``LatticeBatch`` of the lattices (``models/base.py``). A sentence longer than ``max_length``
characters (default: the fewest ``max_characters`` of the embedder and the encoder, when they
have learned positions: ``hf_transformer``, ``char_bert``, ``lattice_bert``) is read in
overlapping windows, one row each, and each character's state is taken from the window where it
is most central (``embedders/windows.py``, ``window_overlap`` characters shared by neighbouring
windows, default a quarter of the window) before the head decodes whole sentences; the batch then
also has ``pieces`` (each row's sentence and first character, the sentences' ``mask``) and its
``tags`` are the whole sentences'. An embedder with ``piece_batch`` (``hf_transformer`` with
``pieces: wordpiece``) adds its word-piece tensors to the batch.

A prediction is ``{"text", "tags", "entities": [{"label", "start", "end", "text"}]}`` with
character offsets, ``end`` exclusive (``text[start:end]``): the ``jsonl_spans`` reader reads a
file of predictions back with its defaults.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Any, Optional

import torch

from multigrain.components.embedders.windows import join_central, split_windows
from multigrain.components.metrics.span_f1 import SpanF1
from multigrain.components.models.base import CharLatticeModel, count_lattice_words, source_of
from multigrain.components.tag_schemes import detect_scheme, extract_spans
from multigrain.components.text import bigrams_of
from multigrain.platform.batching import length_mask, pad_ids
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.errors import DataError
from multigrain.platform.kinds import Encoder, Head, Model, TokenEmbedder
from multigrain.platform.vocab import Vocabulary


@Model.register("tagger")
class Tagger(CharLatticeModel):
    task = "ner"
    leaderboard_metric = "f1"

    def __init__(self, vocab: Vocabulary, embedder: TokenEmbedder, head: Lazy[Head],
                 encoder: Optional[Lazy[Encoder]] = None,
                 scheme: Optional[str] = None, max_length: Optional[int] = None,
                 window_overlap: Optional[int] = None):
        super().__init__(vocab, embedder, encoder)
        limits = [x for x in (getattr(embedder, "max_characters", None), getattr(self.encoder, "max_characters", None))
                  if x is not None]
        limit = min(limits) if limits else None
        if max_length is not None and max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        if max_length is not None and limit is not None and max_length > limit:
            raise ValueError(f"max_length {max_length} is more than the encoder's {limit} positions")
        self.max_length = max_length if max_length is not None else limit
        too_long = self.max_length is not None and window_overlap is not None and window_overlap >= self.max_length
        if window_overlap is not None and (window_overlap < 0 or too_long):
            raise ValueError(f"window_overlap must be in [0, max_length {self.max_length}), got {window_overlap}")
        self.window_overlap = window_overlap
        self.labels = vocab.tokens("tags")
        self.scheme = scheme or detect_scheme(self.labels)
        self.head = head.construct(input_dim=self.output_dim, labels=self.labels,
                                   offered={"embedder_dim": embedder.get_output_dim()})
        self.metric = SpanF1(self.scheme)

    # data -----------------------------------------------------------------
    @classmethod
    def count_vocab_items(cls, instance: Instance, counters: dict[str, Counter]) -> None:
        chars = instance["chars"]
        counters.setdefault("chars", Counter()).update(chars)
        counters.setdefault("bigrams", Counter()).update(bigrams_of(chars))
        if "tags" in instance:
            counters.setdefault("tags", Counter()).update(instance["tags"])
        lattice = instance.get("lattice")
        if lattice is not None:
            count_lattice_words(lattice, counters)

    def tag_ids(self, instance: Instance) -> list[int]:
        """The ids of the instance's tags; a tag the model was not trained with is a DataError naming
        the instance's file and line (a tagger can neither learn nor score it)."""
        try:
            return self.vocab.indices("tags", instance["tags"])
        except KeyError:
            unknown = next(t for t in instance["tags"] if t not in set(self.labels))
            raise DataError(*source_of(instance), f"tag {unknown!r} is not one of the model's tags "
                                                  f"({', '.join(self.labels[:20])}"
                                                  f"{', ...' if len(self.labels) > 20 else ''})") from None

    def tensorize(self, instances: list[Instance]) -> dict[str, Any]:
        rows, layout = split_windows(instances, self.max_length, self.window_overlap)
        v = self.vocab
        batch: dict[str, Any] = {
            "chars": pad_ids([self.char_ids(x["chars"]) for x in rows]),
            "bigrams": pad_ids([v.indices("bigrams", bigrams_of(x["chars"])) for x in rows]),
            "mask": length_mask([len(x["chars"]) for x in rows]),
        }
        pieces = getattr(self.embedder, "piece_batch", None)
        if pieces is not None:
            batch.update(pieces([x["chars"] for x in rows]))
        if all("tags" in x for x in instances):
            batch["tags"] = pad_ids([self.tag_ids(x) for x in instances])
        lattice = self.collate_lattices([x.get("lattice") for x in rows])
        if lattice is not None:
            batch["lattice"] = lattice
        if layout is not None:
            batch["pieces"] = {"instance": torch.tensor([i for i, _ in layout]),
                               "start": torch.tensor([start for _, start in layout]),
                               "mask": length_mask([len(x["chars"]) for x in instances])}
        return batch

    def text_to_instance(self, data: dict) -> Instance:
        """``{"text": "..."}`` or ``{"chars": ["...", ...]}``, with optional gold ``"tags"`` (one of
        the model's labels per character); anything else is a ValueError saying what is wrong."""
        if "chars" in data:
            chars = data["chars"]
            if not isinstance(chars, list) or not chars or not all(isinstance(c, str) and len(c) == 1 for c in chars):
                raise ValueError('"chars" must be a non-empty list of single characters')
        elif "text" in data:
            text = data["text"]
            if not isinstance(text, str) or not text.strip():  # as the sentence models: no text to tag
                raise ValueError(f'"text" must be a non-empty string, got {json.dumps(text)[:40]}')
            chars = list(text)
        else:
            raise ValueError('expected "text" or "chars"')
        inst = Instance({"chars": chars})
        if "tags" in data:
            tags = data["tags"]
            if not isinstance(tags, list) or len(tags) != len(chars):
                raise ValueError(f'"tags" must be a list of one tag per character ({len(chars)})')
            unknown = sorted({str(t) for t in tags if t not in self.labels})
            if unknown:
                raise ValueError(f'unknown tags {", ".join(unknown[:5])}; the model knows {", ".join(self.labels[:12])}...')
            inst["tags"] = tags
        return inst

    # computation ----------------------------------------------------------
    def forward(self, chars: torch.Tensor, mask: torch.Tensor, tags: Optional[torch.Tensor] = None,
                pieces: Optional[dict] = None, **batch) -> dict[str, torch.Tensor]:
        """chars, bigrams [B, n]; mask [B, n] bool; tags [B, n]; optional lattice (LatticeBatch);
        ``pieces`` when the rows are windows of longer sentences: the rows' states are joined into
        the sentences' ``[B', N, d]`` (``tags`` are the sentences' ``[B', N]``) before the head."""
        embedded, states = self.embed_and_encode(chars, mask, batch)
        inputs = embedded[:, : chars.shape[1]]
        if pieces is not None:
            where = (mask, pieces["instance"], pieces["start"], pieces["mask"])
            states, inputs = join_central(states, *where), join_central(inputs, *where)
            mask = pieces["mask"]
        out = self.head(states, mask, tags=tags, inputs=inputs)
        if tags is not None and not self.training:
            self.metric(self.decode_tags(out["predictions"], mask), self.decode_tags(tags, mask))
        return out

    def decode_tags(self, ids: torch.Tensor, mask: torch.Tensor) -> list[list[str]]:
        lengths = mask.sum(-1).tolist()
        rows = ids.tolist()
        return [[self.labels[i] for i in row[:n]] for row, n in zip(rows, lengths)]

    def get_metrics(self, reset: bool = False) -> dict[str, float]:
        if reset:
            self._last_report = self.metric.report()
        return {k: v for k, v in self.metric.get_metric(reset).items() if "-" not in k}

    def report(self) -> dict:
        """Per-type P/R/F1 of the last completed evaluation."""
        return getattr(self, "_last_report", {})

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        mask = length_mask([len(x["chars"]) for x in instances])
        tags = self.decode_tags(output["predictions"].cpu(), mask)
        out = []
        for inst, t in zip(instances, tags):
            spans = extract_spans(t, self.scheme)
            # offsets as the jsonl_spans reader reads them by default: end exclusive, key "label"
            out.append({"text": "".join(inst["chars"]), "tags": t,
                        "entities": [{"label": ty, "start": s, "end": e + 1, "text": "".join(inst["chars"][s:e + 1])}
                                     for ty, s, e in spans]})
        return out
