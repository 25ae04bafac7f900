"""Several named test sets per run (the spec's ``test_sets``), each its own leaderboard.

A spec may name test sets beside (or instead of) ``test_data_path``::

    test_sets: {
      tvsub: { path: 'data/tvsub/test.zh', reader: { type: 'tvsub', references: [...] } },
      wmt22: { path: 'data/wmt22/src.zh', reader: { type: 'parallel_refs', references: [...] } },
    }

After training, the best weights are evaluated on each (with its ``reader``, else the spec's test
reader). The scores go into ``metrics.json`` as ``test_<name>_<metric>`` (and, per set, under
``test_sets``), onto the run's own MLflow run under the same keys, and into one leaderboard row
per set: an MLflow run in experiment ``<task>/<name>`` tagged ``leaderboard=true``,
``test_set=<name>`` and ``evaluated_on=<name>``, its scores as ``test_<metric>`` and ranked by the
model's ``leaderboard_metric``, like a row of ``multigrain evaluate-all``. A model's
``tracking_tags()`` (when it has that method, e.g. a sacrebleu signature) become tags of the run
and of every row. Rows are recorded before the run is marked FINISHED and never twice (a row of
the same spec hash, run directory and set is kept), so a kill in between is repaired by a resume.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from multigrain.platform.errors import ConfigurationError, Problem
from multigrain.platform.kinds import Reader

#: a test set's name: part of metric keys (``test_<name>_bleu``) and of an experiment name (``mt/<name>``)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]*$")


class EvaluationSet:
    """One named test set: a data file and the reader of its format (default: the test reader)."""

    def __init__(self, path: str, reader: Optional[Reader] = None):
        self.path = path
        self.reader = reader


def spec_problems(spec: dict, check_data_paths: bool) -> list[Problem]:
    """Bad test-set names, and (``check_data_paths``) paths that do not exist."""
    sets = spec.get("test_sets")
    problems = []
    if not isinstance(sets, dict):
        return problems
    for name, entry in sets.items():
        if not NAME.match(str(name)):
            problems.append(Problem(f"test_sets.{name}", "a test set's name is letters, digits and '_' (it names "
                                                         "metrics test_<name>_<metric> and an experiment "
                                                         "<task>/<name>)", "value"))
        path = entry.get("path") if isinstance(entry, dict) else None
        if check_data_paths and isinstance(path, str) and not Path(path).exists():
            problems.append(Problem(f"test_sets.{name}.path", f"file not found: {path} (paths are relative to "
                                                              f"{Path.cwd()})", "file"))
    return problems


def read_test_sets(exp) -> dict[str, list]:
    """The instances of every test set of the experiment (read before training: bad data fails early)."""
    if not exp.test_sets or not exp.evaluate_on_test:
        return {}
    return {name: list((s.reader or exp.test_dataset_reader).read(s.path)) for name, s in exp.test_sets.items()}


def tracking_tags(model) -> dict[str, str]:
    """The model's ``tracking_tags()`` (str -> str), or none."""
    method = getattr(model, "tracking_tags", None)
    return {str(k): str(v) for k, v in method().items()} if callable(method) else {}


def evaluate_test_sets(exp, model, device, instances: dict[str, list], batches_of) -> dict:
    """Result keys for ``metrics.json``: ``test_sets`` (name -> data, examples, metrics and the
    model's ``tracking_tags()`` right after that evaluation: a sacrebleu signature names the set's
    reference count) and ``test_<name>_<metric>`` for each score; ``batches_of(instances)``: the
    evaluation batches."""
    from multigrain.platform.training import evaluate

    if not instances:
        return {}
    out: dict = {"test_sets": {}}
    for name, data in instances.items():
        metrics = evaluate(model, batches_of(data), device, f"test {name} (best)")
        out["test_sets"][name] = {"data": exp.test_sets[name].path, "examples": len(data), "metrics": metrics,
                                  "tracking_tags": tracking_tags(model)}
        out.update({f"test_{name}_{key}": value for key, value in metrics.items()})
    return out


def evaluate_named(run, name: str, archive, batch_size: Optional[int] = None) -> tuple[dict, int, str]:
    """(metrics, examples, data path) of ``run``'s archive on its spec's test set ``name``."""
    from multigrain.platform.training import evaluate

    sets = run.experiment.test_sets or {}
    if name not in sets:
        raise ConfigurationError(f"{run.run_dir}: its spec has no test set {name!r}"
                                 f"{' (it has: ' + ', '.join(sorted(sets)) + ')' if sets else ''}")
    chosen = sets[name]
    instances = list((chosen.reader or run.experiment.test_dataset_reader).read(chosen.path))
    metrics = evaluate(archive.model, archive.batches(instances, batch_size), archive.device, f"test {name}")
    return metrics, len(instances), chosen.path
