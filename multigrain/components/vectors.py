"""Pretrained vectors from ``.vec`` text files (parsed by ``multigrain.platform.vec``) copied
into embedding tables.

Here, outside ``embedders/`` and ``encoders/``, so that an embedder (``char_bigram``) and an
encoder (``hrmf``) share it without importing each other.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

from multigrain.platform.errors import ConfigurationError, DataError, DataWarning
from multigrain.platform.paths import is_there
from multigrain.platform.vec import vec_rows


def load_vec_into(weight: torch.Tensor, tokens: list[str], path: str, skip: int = 2) -> int:
    """Copy the rows of ``path`` whose token is in ``tokens`` into ``weight`` [V, d].

    The first ``skip`` tokens (padding, OOV) are left alone. Returns how many tokens were
    found; the others keep their random initialisation (the count is reported as a warning).
    """
    if not is_there(path, "file"):
        raise ConfigurationError(f"{path}: no such file (pretrained vectors)")
    index = {t: i for i, t in enumerate(tokens) if i >= skip}
    dim = weight.shape[1]
    found = 0
    for n, parts in vec_rows(path):
        if len(parts) - 1 != dim:
            raise DataError(path, n, f"vector of size {len(parts) - 1}, the embedding has size {dim}")
        i = index.get(parts[0])
        if i is not None:
            weight[i] = torch.tensor([float(x) for x in parts[1:]])
            found += 1
    missing = len(index) - found
    warnings.warn(f"{Path(path).name}: {found} of {len(index)} tokens found; {missing} initialised randomly",
                  DataWarning)
    return found
