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


def evaluate_test_sets(exp, model, device, instances: dict[str, list]) -> dict:
    """Result keys for ``metrics.json``: ``test_sets`` (name -> data, examples, metrics) and
    ``test_<name>_<metric>`` for each score."""
    from multigrain.platform.experiment import eval_batches
    from multigrain.platform.training import evaluate

    if not instances:
        return {}
    out: dict = {"test_sets": {}}
    for name, data in instances.items():
        metrics = evaluate(model, eval_batches(model, data, exp.data_loader), device, f"test {name} (best)")
        out["test_sets"][name] = {"data": exp.test_sets[name].path, "examples": len(data), "metrics": metrics}
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


def record_row(spec: dict, ident: dict, digest: str, run_dir: str, name: str, path: str, metrics: dict,
               leaderboard_metric: Optional[str], tags: dict[str, str], uri: Optional[str] = None,
               commit: Optional[str] = None, source: Optional[str] = None, reuse: bool = True) -> str:
    """The leaderboard row of one run on test set ``name`` (experiment ``<task>/<name>``); with
    ``reuse`` an existing finished row of the same spec hash, run directory and set is kept (a
    training's rows are recorded once). Returns its run id."""
    from mlflow.entities import RunTag

    from multigrain.platform.tracking import RunLogger, experiment_name, open_store, tracking_uri

    row_ident = {**ident, "dataset": name}
    client = open_store(tracking_uri(uri))
    experiment = client.get_experiment_by_name(experiment_name(row_ident))
    if experiment is not None and reuse:
        for existing in client.search_runs([experiment.experiment_id], filter_string=(
                f"tags.spec_hash = '{digest}' and tags.test_set = '{name}' and attributes.status = 'FINISHED'")):
            if existing.data.tags.get("run_dir") == str(run_dir):
                return existing.info.run_id
    logger = RunLogger(uri)
    run_id = logger.start(spec, row_ident, digest, str(run_dir), leaderboard=True, commit=commit, source=source)
    title = logger.client.get_run(run_id).data.tags.get("mlflow.runName", "")
    extra = {**tags, "test_set": name, "evaluated_on": name, "test_set_path": str(path),
             "mlflow.runName": f"{title} on {name}"}
    logger.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in extra.items()], synchronous=True)
    logger.finish({"test": metrics, "leaderboard_metric": leaderboard_metric}, str(run_dir))
    return run_id


def record_test_sets(spec: dict, result: dict, uri: Optional[str] = None, source: Optional[str] = None) -> list[str]:
    """The leaderboard rows of a finished ``result`` (``metrics.json``) on each of its test sets."""
    ident = {k: result.get(k, "") for k in ("task", "dataset", "model", "encoder")}
    commit = result.get("git_commit")
    commit = commit if commit and commit != "unknown" else None
    return [record_row(spec, ident, result["spec_hash"], result["run_dir"], name, entry["data"], entry["metrics"],
                       result.get("leaderboard_metric"), result.get("tracking_tags") or {}, uri, commit,
                       source or result.get("source"))
            for name, entry in (result.get("test_sets") or {}).items()]


def split_data_arguments(run_dirs: list[str], data: list[str]) -> tuple[list[str], list[str]]:
    """``evaluate-all --data`` entries as (files, test-set names): an entry that is no file but a
    test set's name is a name; a name some run's spec lacks is an error naming those runs."""
    from multigrain.platform.archive import read_spec

    files = [d for d in data if Path(d).exists() or not NAME.match(d)]
    names = [d for d in data if d not in files]
    problems = []
    for name in names:
        lacking = []
        for run_dir in run_dirs:
            try:
                sets = read_spec(Path(run_dir)).get("test_sets") or {}
            except (OSError, ValueError, ConfigurationError):
                continue  # not a run directory: check_archives names it
            if name not in sets:
                lacking.append(run_dir)
        if lacking:
            problems.append(f"--data {name}: no such file, and no test set of that name in the spec of "
                            f"{', '.join(lacking)}")
    if problems:
        raise ConfigurationError("\n".join(problems))
    return files, names
