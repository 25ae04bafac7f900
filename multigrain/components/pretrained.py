"""Initialising a component from a pre-training run: the tensors saved under one prefix of a
checkpoint (``embedder.``, ``encoder.``) copied into the component, all of them, shapes equal.

The checkpoint is a run directory (its ``best.pt``) or a ``.pt`` file, loaded with
``weights_only=True`` through ``multigrain.platform.checkpoints.load_checkpoint``. Anything that does
not fit is one ConfigurationError naming the file and what is wrong (the construction machinery
adds the spec path of the component, e.g. ``model.encoder``).
"""
from __future__ import annotations

from pathlib import Path

import torch

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.initializer import weights_file


def load_pretrained(module: torch.nn.Module, path: str, prefix: str) -> None:
    """Copy ``prefix + name`` of the checkpoint at ``path`` into every tensor ``name`` of
    ``module.state_dict()``; a missing tensor or a shape mismatch is a ConfigurationError."""
    from multigrain.platform.checkpoints import load_checkpoint
    from multigrain.platform.weights import tensor_dict

    weights = weights_file(Path(path), "pretrained: ")
    state = load_checkpoint(weights, "cpu")  # a regular file of tensors and plain values, else one clear error
    state = state.get("model", state) if "model" in state and isinstance(state["model"], dict) else state
    tensor_dict(state, weights, where="pretrained: ")
    own = module.state_dict()
    missing = [name for name in own if prefix + name not in state]
    if len(missing) == len(own):
        raise ConfigurationError(f"pretrained: {weights} holds no tensor under {prefix!r} (not a pre-training run "
                                 f"of this component?)")
    if missing:
        raise ConfigurationError(f"pretrained: {weights} lacks {len(missing)} tensors of this component, e.g. "
                                 f"{prefix}{missing[0]} (a different model size or options?)")
    wrong = [f"{prefix}{name} {tuple(state[prefix + name].shape)} in the checkpoint vs {tuple(t.shape)} here"
             for name, t in own.items() if tuple(state[prefix + name].shape) != tuple(t.shape)]
    if wrong:
        hint = (" (the vocabulary differs from the pre-training run's: set vocabulary.directory to its "
                "vocabulary folder)" if any("tokens.weight" in w for w in wrong) else "")
        raise ConfigurationError(f"pretrained: {weights}: size mismatch: {'; '.join(wrong[:3])}{hint}")
    module.load_state_dict({name: state[prefix + name] for name in own})
