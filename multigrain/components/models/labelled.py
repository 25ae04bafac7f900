"""``LabelledModel``, the base of the sentence models that predict one label per example
(classifier, pair classifier), scored by accuracy and macro F1."""
from __future__ import annotations

from typing import Any, Optional

import torch

from multigrain.components.heads.classifier import ClassifierHead
from multigrain.components.metrics.accuracy import Accuracy
from multigrain.components.models.base import source_of
from multigrain.components.models.packing import Packed
from multigrain.components.models.sentence import SentenceModel
from multigrain.platform.config import Lazy
from multigrain.platform.data import Instance
from multigrain.platform.errors import ConfigurationError, DataError
from multigrain.platform.kinds import Encoder, Head, TokenEmbedder
from multigrain.platform.vocab import Vocabulary


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

    def given_label(self, data: dict) -> str:
        """The ``label`` of a predict input line (a string, or a whole number written without quotes),
        one of the model's labels; else ValueError. Checked line by line, so a bad label is refused
        whatever the lines beside it."""
        label = data["label"]
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            raise ValueError(f'"label" must be a string, got {type(label).__name__}')
        if str(label) not in self.label_index:
            raise ValueError(f'"label" {str(label)!r} is not in the label set ({", ".join(self.labels)})')
        return str(label)

    def label_ids(self, instances: list[Instance]) -> Optional[torch.Tensor]:
        if not all("label" in x for x in instances):
            return None
        ids = []
        for x in instances:
            i = self.label_index.get(x["label"])
            if i is None:
                raise DataError(*source_of(x), f"label {x['label']!r} is not in the label set "
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
