"""The registry kinds that would be the same for an English POS tagger.

Each implementation subclasses one of these and registers itself::

    @Encoder.register("bilstm")
    class BiLstmEncoder(Encoder): ...

Domain kinds (``lattice_builder``) live with their components.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterator, Optional

import torch

from multigrain.platform.data import Instance
from multigrain.platform.registry import Registrable


class Reader(Registrable, kind="reader"):
    """Reads a data file lazily. ``read(path)`` yields Instances, raising DataError(path, line, msg)."""

    def read(self, path: str) -> Iterator[Instance]:
        raise NotImplementedError

    def annotate(self, instances: list[Instance]) -> list[Instance]:
        """Add what ``read`` derives from the text (e.g. lattices) to instances made elsewhere,
        such as ``predict`` input; the default adds nothing."""
        return instances


class TokenEmbedder(torch.nn.Module, Registrable, kind="token_embedder"):
    """Turns a batch's token ids into vectors: ``forward(batch) -> [B, T, d]``."""

    def get_output_dim(self) -> int:
        raise NotImplementedError


class Encoder(torch.nn.Module, Registrable, kind="encoder"):
    """``forward(inputs [B,T,d_in], mask [B,T] bool, batch: dict) -> char states [B, n, d_out]``.

    For character-only encoders T == n. Lattice encoders read the lattice tensors from
    ``batch["lattice"]`` (a LatticeBatch) and return states for the character positions only.
    """

    def get_input_dim(self) -> int:
        raise NotImplementedError

    def get_output_dim(self) -> int:
        raise NotImplementedError


class Head(torch.nn.Module, Registrable, kind="head"):
    """Task output layer: loss and predictions from encoder states."""


class Metric(Registrable, kind="metric"):
    """Accumulates over batches; ``get_metric(reset)`` returns ``{name: float}``."""

    def reset(self) -> None:
        raise NotImplementedError

    def get_metric(self, reset: bool = False) -> dict[str, float]:
        raise NotImplementedError


class Model(torch.nn.Module, Registrable, kind="model"):
    """A trainable model.

    - ``count_vocab_items(instance, counters)`` (classmethod): the tokens the vocabulary needs.
    - ``tensorize(instances) -> batch dict`` (tensors + whatever the forward needs).
    - ``forward(**batch) -> dict`` with ``loss`` when the batch has gold labels; a loss that is a
      mean over something other than the batch's instances (tokens, masked positions) adds
      ``loss_count``, how many it averages, so that data-parallel replicas weight their slices
      exactly (``platform/data_parallel.py``); a sum of such means adds ``loss_terms``,
      ``{name: (mean, count)}``.
    - ``get_metrics(reset)`` and ``make_output_human_readable(output, instances) -> list[dict]``.
    - optional ``instance_lengths(instance) -> tuple[int, ...]``: the lengths of the fields that
      are padded separately (a translator's ``(source, target)``); with ``data_loader.max_tokens``
      training batches are then cut by ``n * sum_f longest_f`` (``platform/batching.py``) and
      bucketed by the sum, else by ``instance_length``.
    """

    #: task name used for the MLflow experiment (``ner``, ``cls``, ``pair``, ``mrc``, ``mt``)
    task: str = "task"
    #: the headline metric of the leaderboard and its direction
    leaderboard_metric: str = "f1"
    #: why ``predict`` and ``serve`` refuse this model (None: it predicts)
    not_predicting: Optional[str] = None

    @classmethod
    def count_vocab_items(cls, instance: Instance, counters: dict[str, Counter]) -> None:
        raise NotImplementedError

    def tensorize(self, instances: list[Instance]) -> dict[str, Any]:
        raise NotImplementedError

    def instance_length(self, instance: Instance) -> int:
        """The length batches are bucketed by."""
        return len(instance["chars"])

    def text_to_instance(self, data: dict) -> Instance:
        """An Instance from one JSON line of ``predict`` input (e.g. ``{"text": ...}``)."""
        raise NotImplementedError

    def get_metrics(self, reset: bool = False) -> dict[str, float]:
        return {}

    def make_output_human_readable(self, output: dict, instances: list[Instance]) -> list[dict]:
        raise NotImplementedError


class Optimizer(Registrable, kind="optimizer"):
    """A torch optimizer built from ``model_parameters`` (injected) and the spec's settings."""


class Scheduler(Registrable, kind="scheduler"):
    """A learning-rate schedule stepped once per batch; built with ``optimizer`` and
    ``num_training_steps`` injected."""

    # whether the rate at a step depends on ``num_training_steps`` (so on trainer.num_epochs): a run
    # of such a schedule cannot be extended to more epochs as if it had been planned that long
    uses_num_training_steps = True
