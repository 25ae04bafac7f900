"""Pretrained vectors from ``.vec`` text files (word2vec/fastText text format): one token and
its numbers a line, after an optional ``count dim`` header line.

Here, outside ``embedders/`` and ``encoders/``, so that an embedder (``char_bigram``), an
encoder (``hrmf``) and the lexicon reader (``lattice.lexicon``) share one parser.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

from multigrain.platform.errors import DataError


def is_vec_header(fields: list[str]) -> bool:
    """Whether the fields of a file's first line are a word2vec/fastText ``count dim`` header."""
    return len(fields) == 2 and all(f.isdigit() for f in fields)


def load_vec_into(weight: torch.Tensor, tokens: list[str], path: str, skip: int = 2) -> int:
    """Copy the rows of ``path`` whose token is in ``tokens`` into ``weight`` [V, d].

    The first ``skip`` tokens (padding, OOV) are left alone. Returns how many tokens were
    found; the others keep their random initialisation (the count is reported as a warning).
    """
    index = {t: i for i, t in enumerate(tokens) if i >= skip}
    dim = weight.shape[1]
    found = 0
    with open(path, encoding="utf-8", errors="strict") as f:
        for n, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if n == 1 and is_vec_header(parts):
                continue
            if len(parts) < 2:
                continue
            if len(parts) - 1 != dim:
                raise DataError(path, n, f"vector of size {len(parts) - 1}, the embedding has size {dim}")
            i = index.get(parts[0])
            if i is not None:
                weight[i] = torch.tensor([float(x) for x in parts[1:]])
                found += 1
    missing = len(index) - found
    warnings.warn(f"{Path(path).name}: {found} of {len(index)} tokens found; {missing} initialised randomly")
    return found
