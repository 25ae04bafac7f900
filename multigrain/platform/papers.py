"""The papers' numbers beside ours. They are kept in one place, ``benchmarks/paper_numbers.json``
(``MULTIGRAIN_PAPER_NUMBERS`` names another file): keyed by MLflow experiment (``ner/resume``),
then by the spec's name without its dataset (``resume_plte_vec`` -> ``plte_vec``); a name ending in
one of ``same_model_suffixes`` falls back to the name without it. A missing file means no paper
numbers (an installed package without the repository's ``benchmarks/``)."""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

DEFAULT = Path(__file__).resolve().parents[2] / "benchmarks" / "paper_numbers.json"


def numbers_file() -> Path:
    return Path(os.environ.get("MULTIGRAIN_PAPER_NUMBERS") or DEFAULT)


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def paper_number(experiment: str, spec_name: str) -> Optional[str]:
    """The paper's test score for the spec ``spec_name`` in ``experiment``, or None."""
    table = _load(str(numbers_file()))
    rows = table.get("experiments", {}).get(experiment) or {}
    dataset = experiment.split("/", 1)[-1]
    variant = spec_name[len(dataset) + 1:] if spec_name.startswith(dataset + "_") else spec_name
    candidates = [variant] + [variant[:-len(s)] for s in table.get("same_model_suffixes", []) if variant.endswith(s)]
    return next((rows[c] for c in candidates if c in rows), None)
