"""Sentence-pair classification (paraphrase / matching) over ``[CLS] a [SEP] b [SEP]``.

Fields ``chars_a``, ``chars_b``, ``label`` and optionally ``lattice_a``/``lattice_b`` (the
``bq_corpus`` reader). Segment ids: 0 for ``[CLS] a [SEP]``, 1 for ``b [SEP]``. Over-long pairs
are cut longest first (see ``models/sentence.py``).
"""
from __future__ import annotations

from typing import Any

from multigrain.components.models.labelled import LabelledModel
from multigrain.components.models.packing import CLS, SEP, Part, pack
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.kinds import Model


@Model.register("pair_classifier")
class PairClassifier(LabelledModel):
    task = "pair"
    text_fields = {"chars_a": "lattice_a", "chars_b": "lattice_b"}

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
            inst["label"] = str(data["label"])
        return inst

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        return [{"text_a": x.get("text_a", "".join(x["chars_a"])), "text_b": x.get("text_b", "".join(x["chars_b"])),
                 **pred} for x, pred in zip(instances, self.predicted_labels(output))]
