"""Sentence-pair classification (paraphrase / matching) over ``[CLS] a [SEP] b [SEP]``.

Fields ``chars_a``, ``chars_b``, ``label`` and optionally ``lattice_a``/``lattice_b`` (the
``bq_corpus`` reader). Segment ids: 0 for ``[CLS] a [SEP]``, 1 for ``b [SEP]``. Over-long pairs
are cut longest first (see ``models/sentence.py``).

Metrics: ``accuracy``, ``macro_f1`` and ``majority_share``, the share of the predictions that
go to the most predicted label. A fine-tuned backbone first learns the label prior: a model
whose dev predictions all go to one label (share >= ``MAJORITY``) has not left the majority
class, and the epoch line says so with what to try (``epoch_hint``).
"""
from __future__ import annotations

from typing import Any, Optional

from multigrain.components.models.labelled import LabelledModel
from multigrain.components.models.packing import CLS, SEP, Part, pack
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.kinds import Model


#: the share of one label among the predictions from which a model "stays at the majority class"
MAJORITY = 0.98


@Model.register("pair_classifier")
class PairClassifier(LabelledModel):
    task = "pair"
    text_fields = {"chars_a": "lattice_a", "chars_b": "lattice_b"}

    def get_metrics(self, reset: bool = False) -> dict[str, float]:
        counts = self.metric.predicted
        share = max(counts.values()) / self.metric.total if self.metric.total else 0.0
        return {**super().get_metrics(reset), "majority_share": share}

    def epoch_hint(self, record: dict) -> Optional[str]:
        """A hint for the epoch line when the dev predictions all went to one label."""
        share = record.get("validation_majority_share")
        pairs = getattr(self, "_last_pairs", {})
        if share is None or share < MAJORITY or not pairs:
            return None
        predicted: dict[int, int] = {}
        gold: dict[int, int] = {}
        for (g, p), n in pairs.items():
            predicted[p] = predicted.get(p, 0) + n
            gold[g] = gold.get(g, 0) + n
        label = max(predicted, key=predicted.get)
        prior = gold.get(label, 0) / max(1, sum(gold.values()))
        return (f"HINT: {share:.0%} of the dev predictions are label {self.labels[label]!r} ({prior:.0%} of the "
                f"gold labels): the model stays at the majority class; train on more pairs or epochs, give the "
                f"new layers a higher rate than the backbone (trainer.optimizer.parameter_groups) with warm-up, "
                f"and check that the two texts are read as a pair")

    def instance_length(self, instance: Instance) -> int:
        return min(len(instance["chars_a"]) + len(instance["chars_b"]) + 3, self.max_length)

    def tensorize(self, instances: list[Instance]) -> dict[str, Any]:
        packed = []
        for x in instances:
            la, lb = self.lengths_within(x, [len(x["chars_a"]), len(x["chars_b"])], 3)
            packed.append(pack([CLS, Part(x["chars_a"], x.get("lattice_a"), 0, la), SEP,
                                Part(x["chars_b"], x.get("lattice_b"), 0, lb), SEP]))
        return self.labelled_batch(packed, instances)

    def text_to_instance(self, data: dict) -> Instance:
        fields = {}
        for key in ("text_a", "text_b"):
            text = data.get(key)
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f'expected a non-empty "{key}"')
            fields[key] = text
            fields["chars" + key[4:]] = split_chars(text)
        inst = Instance(fields)
        if "label" in data:
            inst["label"] = self.given_label(data)
        return inst

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        return [{"text_a": x.get("text_a", "".join(x["chars_a"])), "text_b": x.get("text_b", "".join(x["chars_b"])),
                 **pred} for x, pred in zip(instances, self.predicted_labels(output))]
