"""The spec's ``initializer`` section: some of a new model's parameters start from the tensors of
the same names in another run's weights instead of their random initialisation (AllenNLP's
``pretrained`` initializer).

Transfer learning between tasks whose models share parts: PLTE[m3e] on Resume starting from a
PLTE[m3e] run on MSRA keeps the backbone, the projections and the lattice encoder, and leaves the
lexicon words and the tag head (another vocabulary, another tag set) to their own initialisation::

    initializer: { weights: 'runs/msra_plte_m3e-...',          // a run directory (best.pt) or a .pt file
                   parameters: ['^embedder\\.', '^encoder\\.'],  // searched in the model's names
                   exclude: ['^embedder\\.words\\.'] }

Every tensor of the model's state (parameters and buffers) that a ``parameters`` pattern finds and
no ``exclude`` pattern finds is copied; each must be in the file with the same shape, and each
pattern must find something. Tensors of the file the patterns do not name are left alone.

It applies once, when a fresh run builds its model, before its first step. A resumed run continues
from ``last.pt``, and ``evaluate``, ``predict`` and ``serve`` load ``best.pt``: none of them reads
the file again, so the source run may be moved or deleted once the run has its weights (a spec
given to ``train`` again still names it, and validation checks that it is there, as for its data).
"""
from __future__ import annotations

import re
from pathlib import Path

from multigrain.platform.errors import ConfigurationError, Problem
from multigrain.platform.weights import load_weights, tensor_dict
from multigrain.platform.paths import weights_missing, weights_path

WHERE = "initializer.weights: "


class InitializerConfig:
    """``weights``: a run directory (its ``best.pt``) or a ``.pt`` file (a state dict, or a
    ``last.pt`` whose ``model`` holds one); ``parameters`` and ``exclude``: regular expressions
    searched in the model's tensor names (``embedder.backbone.model.encoder.layer.0...``)."""

    def __init__(self, weights: str, parameters: list[str] = (".*",), exclude: list[str] = ()):
        if not weights:
            raise ValueError("weights: expected a run directory or a .pt file, got an empty string")
        if not parameters:
            raise ValueError("parameters: expected at least one regular expression (['.*'] copies every tensor)")
        for key, patterns in (("parameters", parameters), ("exclude", exclude)):
            for i, pattern in enumerate(patterns):
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise ValueError(f"{key}.{i}: {pattern!r} is not a regular expression ({e})") from None
        self.weights = weights
        self.parameters = list(parameters)
        self.exclude = list(exclude)


def weights_file(path: Path, where: str) -> Path:
    """:func:`weights_path`, which must be a file: else a ConfigurationError with
    :func:`weights_missing`'s reason, after ``where``."""
    if problem := weights_missing(path):
        raise ConfigurationError(f"{where}{problem}")
    return weights_path(path)


def spec_problems(spec: dict) -> list[Problem]:
    """A named ``initializer.weights`` that is not there, found when the spec is validated."""
    section = spec.get("initializer")
    weights = section.get("weights") if isinstance(section, dict) else None
    if not isinstance(weights, str):
        return []  # the type check reports it
    problem = weights_missing(weights)
    return [Problem("initializer.weights", problem, "file")] if problem else []


def model_state(weights: Path, where: str) -> dict:
    """The model's tensors in a weights file: ``best.pt``, or ``last.pt`` whose ``model`` holds them."""
    state = load_weights(weights, "checkpoint", "cpu", where=where)
    if isinstance(state.get("model"), dict):
        state = state["model"]  # last.pt: the model beside the optimizer and the trainer's state
    return tensor_dict(state, weights, where=where)


def initialize(model, config: InitializerConfig) -> int:
    """Copies the tensors ``config`` names from its file into ``model``; returns how many. Anything
    that does not fit is one ConfigurationError naming the spec path, the file and the tensor."""
    weights = weights_file(Path(config.weights), WHERE)
    state = model_state(weights, WHERE)
    own = model.state_dict()
    chosen = [re.compile(p) for p in config.parameters]
    left_out = [re.compile(p) for p in config.exclude]
    for i, pattern in enumerate(chosen):
        if not any(pattern.search(name) for name in own):
            tops = sorted({name.split(".")[0] for name in own})
            raise ConfigurationError(f"initializer.parameters.{i}: {pattern.pattern!r} matches no tensor of the "
                                     f"model (its modules: {', '.join(tops)})")
    names = [n for n in own if any(p.search(n) for p in chosen) and not any(p.search(n) for p in left_out)]
    if not names:
        raise ConfigurationError("initializer.exclude: leaves no tensor of those initializer.parameters names")
    missing = [n for n in names if n not in state]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise ConfigurationError(f"{WHERE}{weights}: has no {missing[0]}{more}, which initializer.parameters "
                                 f"names (leave it out with initializer.exclude)")
    for n in names:
        if tuple(state[n].shape) != tuple(own[n].shape):
            raise ConfigurationError(f"{WHERE}{weights}: {n} has shape {list(state[n].shape)}, the model's "
                                     f"{list(own[n].shape)} (leave it out with initializer.exclude)")
    model.load_state_dict({n: state[n] for n in names}, strict=False)
    return len(names)
