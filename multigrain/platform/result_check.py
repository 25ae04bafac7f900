"""A run directory's ``metrics.json`` and ``config.json`` checked before ``multigrain log`` creates
an MLflow run from them (``tracking.replay``): every key replay reads has the type it needs, every
metric key is one MLflow stores, every number converts to a float, and the experiment name is
safe (``store_names``). A run directory copied from another machine is input like any other: a
wrong type is one error naming the file and the key, and no MLflow run is left RUNNING."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from multigrain.platform.store_names import (INT64_MAX, TAG_VALUE_MAX, experiment_problem, key_problem, number_problem,
                                             shown, text_problem, whole_problem)

#: a spec hash (sha256 hex; at least the 8 characters a run directory's name carries)
SPEC_HASH = re.compile(r"[0-9a-f]{8,64}")
#: per-epoch record keys that are no curves (artifacts.NOT_CURVES) may still be numbers
SUMMARY_NUMBERS = ("training_seconds", "seconds", "epochs_completed", "best_epoch")


def result_problems(result: Any) -> list[str]:
    """Every problem of a ``metrics.json`` (``"key: why"``), in file order; empty when replay can log it."""
    if not isinstance(result, dict):
        return [f"expected an object, got {shown(result)}"]
    out: list[str] = []

    def add(where: str, why: Optional[str]) -> None:
        if why:
            out.append(f"{where}: {why}")

    for key in ("task", "dataset", "model", "encoder"):
        add(key, text_problem(result.get(key), TAG_VALUE_MAX) if key in result else "missing")
    if isinstance(result.get("task"), str) and isinstance(result.get("dataset"), str):
        add("task/dataset", experiment_problem(f"{result['task']}/{result['dataset']}"))
    digest = result.get("spec_hash")
    if not (isinstance(digest, str) and SPEC_HASH.fullmatch(digest)):
        out.append(f"spec_hash: expected a spec hash (hexadecimal), got {shown(digest)}")
    for key in ("git_commit", "source", "leaderboard_metric"):
        if result.get(key) is not None:
            add(key, text_problem(result[key], TAG_VALUE_MAX))
    for key in SUMMARY_NUMBERS:
        if result.get(key) is not None:
            add(key, number_problem(result[key]))
    history = result.get("history", [])
    if not isinstance(history, list):
        out.append("history: expected a list of per-epoch records")
        history = []
    for i, record in enumerate(history):
        if not isinstance(record, dict):
            out.append(f"history[{i}]: expected an object")
            continue
        add(f"history[{i}].epoch", whole_problem(record.get("epoch"), 0, INT64_MAX))
        for key, value in record.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "epoch":
                add(f"history[{i}]", key_problem(key))
                add(f"history[{i}].{key}", _float_problem(value))
    for split, prefix in (("validation", "best_validation"), ("test", "test")):
        out += [f"{split}{p}" for p in _scores_problems(result.get(split), prefix)]
    sets = result.get("test_sets")
    if sets is not None and not isinstance(sets, dict):
        out.append("test_sets: expected an object")
    for name, entry in (sets if isinstance(sets, dict) else {}).items():
        if isinstance(result.get("task"), str):
            add(f"test_sets.{name}", experiment_problem(f"{result['task']}/{name}"))
        if not isinstance(entry, dict):
            out.append(f"test_sets.{name}: expected an object")
            continue
        add(f"test_sets.{name}.data", text_problem(entry.get("data"), TAG_VALUE_MAX))
        out += [f"test_sets.{name}.metrics{p}" for p in _scores_problems(entry.get("metrics"), "test", True)]
        if entry.get("tracking_tags") is not None:
            out += [f"test_sets.{name}.tracking_tags{p}" for p in _tags_problems(entry["tracking_tags"])]
    if result.get("tracking_tags") is not None:
        out += [f"tracking_tags{p}" for p in _tags_problems(result["tracking_tags"])]
    add("test_confusion", _confusion_problem(result.get("test_confusion")))
    return out


def spec_problems(spec: Any) -> list[str]:
    """Problems of a ``config.json`` for logging: an object whose flattened keys MLflow stores as params."""
    if not isinstance(spec, dict):
        return [f"expected an object, got {shown(spec)}"]
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.tracking import flatten, param_key, spec_params

    out = [f"{key}: {why}" for key in flatten(spec) for why in [key_problem(param_key(key))] if why][:5]
    try:
        spec_params(spec)  # two keys logged as one param (a long key cut to MLflow's 250 characters)
    except ConfigurationError as e:
        out.append(str(e))
    return out


def _float_problem(value: Any) -> Optional[str]:
    """Like ``number_problem``, but NaN and infinities pass: a diverged training's loss is data."""
    why = number_problem(value)
    return None if why and why.startswith("expected a finite") else why


def _scores_problems(scores: Any, prefix: str, required: bool = False) -> list[str]:
    if scores is None and not required:
        return []
    if not isinstance(scores, dict):
        return [f": expected an object of numbers, got {shown(scores)}"]
    out = []
    for key, value in scores.items():
        why = key_problem(f"{prefix}_{key}") if isinstance(key, str) else key_problem(key)
        why = why or _float_problem(value)
        if why:
            out.append(f".{key}: {why}")
    return out


def _tags_problems(tags: Any) -> list[str]:
    if not isinstance(tags, dict):
        return [f": expected an object of strings, got {shown(tags)}"]
    return [f".{key}: {why}" for key, value in tags.items()
            for why in [key_problem(key) or text_problem(str(value), TAG_VALUE_MAX)] if why]


def _confusion_problem(confusion: Any) -> Optional[str]:
    """``{"labels": [...], "matrix": [[counts]]}`` (square, one row and column per label), or nothing."""
    if not confusion:
        return None
    if not isinstance(confusion, dict):
        return f"expected an object, got {shown(confusion)}"
    labels, matrix = confusion.get("labels"), confusion.get("matrix")
    if not labels:
        return None  # no picture is drawn
    if not isinstance(labels, list) or not all(isinstance(x, (str, int)) for x in labels):
        return "labels: expected a list of labels"
    n = len(labels)
    if not (isinstance(matrix, list) and len(matrix) == n and
            all(isinstance(row, list) and len(row) == n for row in matrix)):
        return f"matrix: expected {n} rows of {n} counts"
    for row in matrix:
        for count in row:
            why = number_problem(count)
            if why:
                return f"matrix: {why}"
    return None


def identity_problem(run_dir: Path, result: dict, spec: dict) -> Optional[str]:
    """Why a run directory's files are not of one run: ``metrics.json``'s spec hash (or the
    ``spec_hash`` file) is not the hash of its ``config.json`` (files copied between runs, or one
    edited); a row logged from them would give one run's scores under another's spec."""
    from multigrain.platform.specs import spec_hash

    digest = spec_hash(spec)
    recorded = [("metrics.json", result.get("spec_hash"))]
    try:
        recorded.append(("spec_hash", (run_dir / "spec_hash").read_text(encoding="utf-8").strip()))
    except (OSError, UnicodeDecodeError):
        pass  # an older run without the file: metrics.json says it
    for name, value in recorded:
        if value != digest:
            return (f"{name} records spec hash {str(value)[:12]}, but config.json hashes to {digest[:12]}: the "
                    f"files are not of one run (copied from another, or edited)")
    return None
