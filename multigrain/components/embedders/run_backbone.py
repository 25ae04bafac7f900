"""The fine-tuned ``hf_transformer`` backbone of another run: intermediate-task training (Phang et
al. 2018, "Sentence Encoders on STILTs") fine-tunes the pretrained backbone on a larger labelled
task first (MSRA NER) and starts the target task (Resume NER) from the result.

A run's weights name the backbone ``embedder.model.*`` (the backbone is the model's embedder:
the m3e-Tagger, BiG[m3e], the sentence models) or ``embedder.backbone.model.*`` (inside a
``backbone_lattice``: PLTE[m3e], Lattice LSTM[m3e]); :func:`backbone_state` returns those tensors
under the backbone's own names, the task's layers (head, lattice encoder) left out.
"""
from __future__ import annotations

import re
from pathlib import Path

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.initializer import model_state, weights_file
from multigrain.platform.weights import mismatch

BACKBONE = re.compile(r"^embedder\.(backbone\.)?model\.")


def backbone_state(weights: Path, where: str = "") -> dict:
    """The backbone's tensors of a run's weights file (``best.pt``, or ``last.pt`` whose ``model``
    holds them), named as in the backbone (``embeddings.word_embeddings.weight``, ...)."""
    kept = {BACKBONE.sub("", k): v for k, v in model_state(weights, where).items() if BACKBONE.match(k)}
    if not kept:
        raise ConfigurationError(f"{where}{weights}: holds no backbone weights (embedder.model.* or "
                                 f"embedder.backbone.model.*: a run of an hf_transformer spec)")
    return kept


def load_backbone(model, archive_path: str, where: str = "archive_path: ") -> int:
    """Every weight of ``model`` (a ``transformers`` model) from the run ``archive_path``: all of
    them must be there with the same shapes, and nothing more (a run over another backbone is one
    error naming the file and the first tensor that does not fit). Returns how many were loaded."""
    weights = weights_file(Path(archive_path), where)
    state = backbone_state(weights, where)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        raise ConfigurationError(f"{where}{weights}: its backbone does not fit this one: {mismatch(str(e))}") from None
    return len(state)
