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
model's ``ranking_metric()`` for that set when it has one (a translator: cased BLEU for cased
references), else its ``leaderboard_metric``, like a row of ``multigrain evaluate-all``. Rows are
recorded before the run is marked FINISHED and never twice (a row of the same spec hash, run
directory and set is kept), so a kill in between is repaired by a resume.

A model's ``tracking_tags()`` (when it has that method, e.g. a sacrebleu signature) are taken
right after each evaluation, as they describe it (the signature names its reference count). Each
row is tagged with its own set's. The run is tagged with every scored set's under that set's name,
``<tag>.<set>`` (``sacrebleu_signature.validation``, ``.test``, ``.tvsub``, ``.wmt22``, ...), and
with the plain ``<tag>`` of the evaluation its own leaderboard row shows (``run_tags``).
"""
from __future__ import annotations

import re
from typing import Optional

from multigrain.platform.errors import ConfigurationError, Problem
from multigrain.platform.kinds import Reader
from multigrain.platform.paths import input_problem, is_there, not_found

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
        if check_data_paths and isinstance(path, str) and not is_there(path):
            problems.append(Problem(f"test_sets.{name}.path", not_found(path), "file"))
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


def ranking_metric(model) -> str:
    """The metric that ranks the model's last evaluation: its ``ranking_metric()`` when it has
    one (a translator: ``bleu_cased`` for cased references), else its ``leaderboard_metric``."""
    method = getattr(model, "ranking_metric", None)
    return str(method()) if callable(method) else model.leaderboard_metric


def evaluation_notes(model) -> dict:
    """The model's ``evaluation_notes()`` about its last evaluation (JSON values: a translator's
    reference streams, sacrebleu signature and cut sources), or none."""
    method = getattr(model, "evaluation_notes", None)
    return dict(method()) if callable(method) else {}


def run_tags(scoped: dict[str, dict], sets: Optional[dict], dataset: Optional[str]) -> dict[str, str]:
    """The run's tags from the tags of each evaluation: ``scoped`` (``validation``, ``test`` -> the
    tags taken after it) and ``sets`` (``metrics.json``'s ``test_sets``). Every tag as
    ``<tag>.<name>``; the plain ``<tag>`` from the evaluation the run's leaderboard row shows: its
    test split, else the test set named as its data set (``mt/tvsub``'s ``tvsub``), else (no test
    score at all) its validation. A run scored on other test sets only has no plain tag: no test
    score of its own experiment to describe."""
    every = dict(scoped)
    every.update({name: entry.get("tracking_tags") or {} for name, entry in (sets or {}).items()})
    out = {f"{key}.{name}": value for name, tags in every.items() for key, value in tags.items()}
    if "test" in scoped:
        shown = scoped["test"]
    elif dataset in (sets or {}):
        shown = every[dataset]
    else:
        shown = scoped.get("validation", {}) if not sets else {}
    out.update(shown)
    return out


def evaluate_test_sets(exp, model, device, instances: dict[str, list], batches_of) -> dict:
    """Result keys for ``metrics.json``: ``test_sets`` (name -> data, examples, metrics and the
    model's ``tracking_tags()`` right after that evaluation: a sacrebleu signature names the set's
    reference count) and ``test_<name>_<metric>`` for each score; ``batches_of(instances)``: the
    evaluation batches."""
    from multigrain.platform.evaluation import evaluate

    if not instances:
        return {}
    out: dict = {"test_sets": {}}
    for name, data in instances.items():
        metrics = evaluate(model, batches_of(data), device, f"test {name} (best)")
        out["test_sets"][name] = {"data": exp.test_sets[name].path, "examples": len(data), "metrics": metrics,
                                  "tracking_tags": tracking_tags(model), "leaderboard_metric": ranking_metric(model)}
        out.update({f"test_{name}_{key}": value for key, value in metrics.items()})
    return out


def named_set(run, name: str) -> EvaluationSet:
    """``run``'s test set ``name`` (its reader given: the spec's test reader when the set names
    none); a name its spec lacks is a ConfigurationError naming those it has."""
    sets = run.experiment.test_sets or {}
    if name not in sets:
        listed = f" (it has: {', '.join(sorted(sets))})" if sets else " (it has none: give a DATA file)"
        raise ConfigurationError(f"{run.run_dir}: its spec has no test set {name!r}{listed}")
    return EvaluationSet(sets[name].path, sets[name].reader or run.experiment.test_dataset_reader)


def set_of_path(run, path: str) -> Optional[str]:
    """The name of ``run``'s test set whose data file is ``path`` (the same file), if any."""
    import os

    for name, chosen in (run.experiment.test_sets or {}).items():
        try:
            if os.path.samefile(chosen.path, path):
                return name
        except OSError:
            continue
    return None


def with_references(reader, files: list[str], path: str):
    """``reader`` reading, for the data file ``path``, the references it reads and then ``files``
    (each line-aligned with ``path``; the reader's ``with_references``). A reader that takes no
    reference files, or a file that does not exist, is a ConfigurationError."""
    method = getattr(reader, "with_references", None)
    kind = getattr(reader, "registered_name", type(reader).__name__)
    if not callable(method):
        raise ConfigurationError(f"--references: the {kind} reader takes no reference files (its data file holds "
                                 f"its references); read the data with a reader of line-aligned references, such "
                                 f"as parallel_refs or tvsub")
    for file in files:
        if problem := input_problem(file, "reference file"):  # a folder, a pipe, a device: not "no such file"
            raise ConfigurationError(f"--references {problem}")
    return method(path, list(files))


def evaluate_named(run, name: str, archive, batch_size: Optional[int] = None) -> tuple[dict, int, str]:
    """(metrics, examples, data path) of ``run``'s archive on its spec's test set ``name``."""
    from multigrain.platform.evaluation import evaluate

    chosen = named_set(run, name)
    instances = list(chosen.reader.read(chosen.path))
    metrics = evaluate(archive.model, archive.batches(instances, batch_size), archive.device, f"test {name}")
    return metrics, len(instances), chosen.path
