"""Sentence classification over ``[CLS] text [SEP]`` (the ``chnsenticorp`` and ``thucnews_titles``
readers' fields ``chars``, ``label`` and optionally ``lattice``); the packing and the model's
layers are described in ``models/sentence.py``."""
from __future__ import annotations

from typing import Any

from multigrain.components.models.labelled import LabelledModel
from multigrain.components.models.packing import CLS, SEP, Part, pack
from multigrain.components.text import split_chars
from multigrain.platform.data import Instance
from multigrain.platform.kinds import Model


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
            inst["label"] = self.given_label(data)
        return inst

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        return [{"text": x.get("text", "".join(x["chars"])), **pred}
                for x, pred in zip(instances, self.predicted_labels(output))]
