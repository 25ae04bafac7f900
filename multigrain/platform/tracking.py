"""MLflow tracking and leaderboards.

Default store: ``sqlite:///mlruns.db`` in the working directory (MLflow 3's file store is
deprecated), overridden by ``--tracking-uri`` or ``MLFLOW_TRACKING_URI``. One experiment per
task/dataset (``ner/resume``); one run per training, tagged ``task``, ``dataset``, ``model``,
``encoder``, ``spec_hash``, ``git_commit`` and ``leaderboard=true``.

Only one process writes a given store: the CLI logs live from the training process; Ray
workers hand their result to the driver, which ``replay``s it.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from multigrain.platform.artifacts import description, write_run_artifacts
from multigrain.platform.mlflow_views import SCORE_METRIC, prepare_experiment, shown_metric
from multigrain.platform.papers import paper_number
from multigrain.platform.paths import same_folder
from multigrain.platform.store import (EXPERIMENT_TAGS, artifact_root, existing_experiment,  # noqa: F401
                                       experiment_id, log_artifact, open_store, sqlite_path)
from multigrain.platform.store_names import KEY_MAX

DEFAULT_DB = "mlruns.db"


def tracking_uri(explicit: Optional[str] = None) -> str:
    if explicit:
        return explicit
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{Path.cwd() / DEFAULT_DB}"


def git_commit(cwd: Optional[str] = None) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
        commit = out.stdout.strip()
        if out.returncode != 0 or not commit:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def flatten(spec: Any, prefix: str = "") -> dict[str, str]:
    """``{"model": {"encoder": {"type": "x"}}}`` -> ``{"model.encoder.type": "x"}``."""
    out: dict[str, str] = {}
    if isinstance(spec, dict) and spec:
        for k, v in spec.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(spec, list) and spec and any(isinstance(v, (dict, list)) for v in spec):
        for i, v in enumerate(spec):
            out.update(flatten(v, f"{prefix}.{i}"))
    else:
        text = spec if isinstance(spec, str) else json.dumps(spec, ensure_ascii=False)
        out[prefix] = text[:6000]
    return out


def param_key(key: str) -> str:
    """The MLflow param key of a flattened spec key: the key itself, or for one longer than MLflow's
    250 characters its first 241, ``-`` and 8 hex digits of its SHA-256 (250 in all), so that two long
    keys sharing their first 250 characters stay two params (a bare cut made them one: "Duplicate
    parameter keys")."""
    import hashlib

    if len(key) <= KEY_MAX:
        return key
    return f"{key[:KEY_MAX - 9]}-{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def spec_params(spec: Any) -> dict[str, str]:
    """The MLflow params of a spec: ``flatten``'s, keyed by ``param_key``. Two spec keys that would
    still be one param (a key spelled as another's ``param_key``) are one ConfigurationError naming
    both, raised before any run exists (``result_check.spec_problems`` reports it for ``multigrain log``)."""
    from multigrain.platform.errors import ConfigurationError

    out: dict[str, str] = {}
    source: dict[str, str] = {}
    for key, value in flatten(spec).items():
        name = param_key(key)
        if name in source:
            raise ConfigurationError(f"{_shown_key(source[name])} and {_shown_key(key)}: both log as the MLflow "
                                     f"param {_shown_key(name)} (a key over {KEY_MAX} characters is cut and hashed)")
        out[name], source[name] = value, key
    return out


def _shown_key(key: str) -> str:
    """A spec key for a message: whole up to 80 characters, else its start, length and end."""
    return repr(key) if len(key) <= 80 else f"{key[:40]!r}...{key[-30:]!r} ({len(key)} characters)"


def experiment_name(ident: dict) -> str:
    return f"{ident['task']}/{ident['dataset']}"


def spec_name(source: Optional[str], run_dir: str, digest: str) -> str:
    """A run's readable name: its spec file's (``resume_plte``), else its run directory's without
    the ``-<hash8>`` suffix (``runs/resume_plte-1a2b3c4d`` -> ``resume_plte``)."""
    if source and Path(source).name != "config.json":
        return Path(source).name.split(".")[0]
    name = Path(str(run_dir)).name
    return name[:-9] if name.endswith(f"-{digest[:8]}") else name


def seed_group(spec: dict) -> str:
    """The runs that differ only in their seed share this: the spec hash without the seed."""
    from multigrain.platform.specs import spec_hash

    return spec_hash({k: v for k, v in spec.items() if k != "seed"})


class RunLogger:
    """Logs one training run: ``start`` -> ``log_epoch``* -> ``finish`` (or ``fail``)."""

    def __init__(self, uri: Optional[str] = None, ext_vars: Optional[dict] = None):
        """``ext_vars``: the Jsonnet external variables of the spec (``provenance``): tagged, named."""
        from multigrain.platform.store_checks import check_store

        self.uri = tracking_uri(uri)
        self.ext_vars = dict(ext_vars or {})
        check_store(self.uri, write=True)  # a wrong URI, a store it cannot write: now, not after the first epoch
        self.client = None
        self.run_id: Optional[str] = None

    def check_experiment(self, ident: dict) -> None:
        """Before the first batch: the run's experiment, if the store has one, keeps its files inside
        the store (``store.existing_experiment``); its MLflow run starts only after the first epoch."""
        client = open_store(self.uri, create=False)
        if client is not None:
            existing_experiment(client, experiment_name(ident))

    def start(self, spec: dict, ident: dict, digest: str, run_dir: str, leaderboard: bool = True,
              commit: Optional[str] = None, source: Optional[str] = None) -> str:
        """``commit``: the git commit that trained the run (default: this checkout's); ``source``:
        the spec file (its name names the run)."""
        from mlflow.entities import Param

        from multigrain.platform.provenance import EXT_VARS_TAG, ext_vars_label

        params = [Param(k, v) for k, v in sorted(spec_params(spec).items())]  # its error: before the store is touched
        self.client = open_store(self.uri)
        exp_id = experiment_id(self.client, experiment_name(ident))
        name, seed = spec_name(source, run_dir, digest), spec.get("seed", 13)
        title = " ".join(filter(None, [name, ext_vars_label(self.ext_vars)]))
        tags = {"task": ident["task"], "dataset": ident["dataset"], "model": ident["model"],
                "encoder": ident["encoder"], "spec_hash": digest, "git_commit": commit or git_commit(),
                "leaderboard": "true" if leaderboard else "false", "run_dir": str(run_dir),
                "spec_name": name, "seed": str(seed), "seed_group": seed_group(spec),
                "mlflow.runName": f"{title} {digest[:8]} seed {seed}"}
        epochs = (spec.get("trainer") or {}).get("num_epochs") if isinstance(spec.get("trainer"), dict) else None
        if epochs is not None:  # the run's epoch count as a tag: params cannot change when a run is extended
            tags["num_epochs"] = str(epochs)
        if self.ext_vars:
            tags[EXT_VARS_TAG] = json.dumps(self.ext_vars, ensure_ascii=False, sort_keys=True)
        tags["mlflow.note.content"] = description(tags, {}, paper_number(experiment_name(ident), name))
        run = self.client.create_run(exp_id, tags=tags)
        self.run_id = run.info.run_id
        with self.failing_on_error():
            for i in range(0, len(params), 100):
                self.client.log_batch(self.run_id, params=params[i:i + 100], synchronous=True)
        return self.run_id

    @contextmanager
    def failing_on_error(self):
        """An error inside ends the started run FAILED (never left RUNNING), then propagates."""
        try:
            yield
        except BaseException:
            try:
                self.end("FAILED")
            except Exception:  # the store itself failed: the original error is the one to see
                pass
            raise

    def continue_run(self, run_id: str) -> bool:
        """Log into an earlier MLflow run of this run directory (a resumed training) instead of
        starting another; False when the store does not hold it."""
        from mlflow.exceptions import MlflowException

        self.client = open_store(self.uri)
        try:
            self.client.get_run(run_id)
        except MlflowException:
            return False
        self.client.update_run(run_id, status="RUNNING")
        self.run_id = run_id
        return True

    def logged_epochs(self) -> set[int]:
        """Epochs whose training loss the run already holds."""
        return {m.step for m in self.client.get_metric_history(self.run_id, "train_loss")}

    def end(self, status: str) -> None:
        """``KILLED`` (stopped, resumable) or ``FAILED``."""
        if self.client and self.run_id:
            self.client.set_terminated(self.run_id, status)

    def log_epoch(self, epoch: int, record: dict) -> None:
        """The epoch's numbers as metrics at step ``epoch``, and tag ``last_epoch_at`` (UTC): the run's
        date, which its MLflow start time is not once it is extended."""
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, epoch) for k, v in record.items()
                   if k != "epoch" and isinstance(v, (int, float)) and not isinstance(v, bool)]
        if metrics:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now / 1000))
            self.client.log_batch(self.run_id, metrics=metrics, tags=[RunTag("last_epoch_at", when)])

    def finish(self, result: dict, run_dir: str) -> None:
        """Log the final scores and end the run FINISHED. A run extended since it started (its
        ``spec_hash`` tag is not the result's) is retagged first (``provenance.bring_up_to_date``)."""
        from mlflow.entities import Metric, RunTag

        from multigrain.platform.provenance import bring_up_to_date

        extended = result.get("spec_hash") not in (None, self.client.get_run(self.run_id).data.tags.get("spec_hash"))
        if extended and (Path(run_dir) / "config.json").is_file():  # the run directory's spec is the longer one now
            from multigrain.platform.archive import read_spec

            spec = read_spec(Path(run_dir))
            bring_up_to_date(self.client, self.run_id, spec, result["spec_hash"], str(run_dir),
                             spec_params(spec), seed_group(spec))
        now = int(time.time() * 1000)
        metrics = []
        # per-epoch curves are validation_*; the best checkpoint's scores are best_validation_*
        for split, prefix in (("validation", "best_validation"), ("test", "test")):
            for k, v in (result.get(split) or {}).items():
                metrics.append(Metric(f"{prefix}_{k}", float(v), now, 0))
        for name, entry in (result.get("test_sets") or {}).items():  # platform/test_sets.py
            metrics += [Metric(f"test_{name}_{k}", float(v), now, 0) for k, v in entry["metrics"].items()]
        for k in ("training_seconds", "seconds", "epochs_completed", "best_epoch"):
            if isinstance(result.get(k), (int, float)):
                metrics.append(Metric(k, float(result[k]), now, 0))
        key = result.get("leaderboard_metric")
        score = score_of(result, key)
        if score is not None:  # one stable name the MLflow runs list shows as a column (multigrain ui)
            metrics.append(Metric(SCORE_METRIC, float(score), now, 0))
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)
        tags = [RunTag(k, str(v)) for k, v in (result.get("tracking_tags") or {}).items()]
        if key:
            tags.append(RunTag("leaderboard_metric", f"test_{key}"))
        if tags:
            self.client.log_batch(self.run_id, tags=tags)
        run_dir = Path(run_dir)
        for name in ("config.json", "metrics.json"):
            if (run_dir / name).exists():
                log_artifact(self.client, self.run_id, str(run_dir / name))
        with tempfile.TemporaryDirectory() as tmp:
            for path in write_run_artifacts(result, Path(tmp)):
                log_artifact(self.client, self.run_id, str(path))
        run = self.client.get_run(self.run_id)
        tags = run.data.tags
        prepare_experiment(self.client, run.info.experiment_id,  # the UI's view
                           shown_metric(tags.get("leaderboard_metric"), run.data.metrics))
        note = description(tags, run.data.metrics, paper_number(experiment_name(tags), tags.get("spec_name", "")))
        self.client.set_tag(self.run_id, "mlflow.note.content", note)
        self.client.set_terminated(self.run_id, "FINISHED")

    def fail(self) -> None:
        self.end("FAILED")


def score_of(result: dict, key: Optional[str]) -> Optional[float]:
    """The leaderboard score of a result (``SCORE_METRIC``): the test value of its ``leaderboard_metric``,
    or the best validation value for a run not evaluated on test."""
    for split in ("test", "validation"):
        value = (result.get(split) or {}).get(key) if key else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    return None


def logged_run(result: dict, uri: Optional[str] = None) -> Optional[str]:
    """The id of a finished MLflow run already holding ``result`` (same spec hash and run dir), if any."""
    client = open_store(tracking_uri(uri))
    exp = client.get_experiment_by_name(experiment_name(result))
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.spec_hash = '{result['spec_hash']}'")
    return next((r.info.run_id for r in runs
                 if same_folder(r.data.tags.get("run_dir"), result["run_dir"]) and r.info.status == "FINISHED"), None)


def unfinished_run(uri: str, ident: dict, digest: str, run_dir: str) -> Optional[str]:
    """The latest MLflow run of ``run_dir`` with this spec hash that did not finish, if any."""
    client = open_store(uri, create=False)
    exp = client.get_experiment_by_name(experiment_name(ident)) if client is not None else None
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.spec_hash = '{digest}' and "
                                                                 f"attributes.status != 'FINISHED'",
                              order_by=["attributes.start_time DESC"])
    return next((r.info.run_id for r in runs if same_folder(r.data.tags.get("run_dir"), run_dir)), None)


def replay(result: dict, spec: dict, uri: Optional[str] = None) -> str:
    """Log a finished run from its result (what a Ray worker returned to the driver, or the
    metrics.json of a run trained elsewhere), tagged with the commit recorded where it trained;
    where none was recorded, or the trainer had no git checkout (a Ray working_dir), this one's."""
    logger = RunLogger(uri, ext_vars=result.get("ext_vars"))
    ident = {k: result[k] for k in ("task", "dataset", "model", "encoder")}
    trained_at = result.get("git_commit")
    run_id = logger.start(spec, ident, result["spec_hash"], result["run_dir"],
                          commit=trained_at if trained_at and trained_at != "unknown" else None,
                          source=result.get("source"))
    with logger.failing_on_error():
        for record in result.get("history", []):
            logger.log_epoch(record["epoch"], record)
        record_test_sets(spec, result, uri)  # before FINISHED: see platform/test_sets.py
        logger.finish(result, result["run_dir"])
    return run_id


def record_test_set_row(spec: dict, ident: dict, digest: str, run_dir: str, name: str, path: str, metrics: dict,
                        leaderboard_metric: Optional[str], tags: dict[str, str], uri: Optional[str] = None,
                        commit: Optional[str] = None, source: Optional[str] = None, reuse: bool = True,
                        ext_vars: Optional[dict] = None) -> str:
    """The leaderboard row of one run on test set ``name`` (experiment ``<task>/<name>``); with
    ``reuse`` an existing finished row of the same spec hash, run directory and set is kept (a
    training's rows are recorded once); an earlier row of the run directory under another spec hash
    (before an extension) is retired. Returns its run id."""
    from mlflow.entities import RunTag

    from multigrain.platform.provenance import retire_earlier_rows

    row_ident = {**ident, "dataset": name}
    client = open_store(tracking_uri(uri))
    experiment = client.get_experiment_by_name(experiment_name(row_ident))
    if experiment is not None and reuse:
        for existing in client.search_runs([experiment.experiment_id], filter_string=(
                f"tags.spec_hash = '{digest}' and tags.test_set = '{name}' and attributes.status = 'FINISHED'")):
            if same_folder(existing.data.tags.get("run_dir"), run_dir):
                return existing.info.run_id
    logger = RunLogger(uri, ext_vars=ext_vars)
    run_id = logger.start(spec, row_ident, digest, str(run_dir), leaderboard=True, commit=commit, source=source)
    with logger.failing_on_error():
        title = logger.client.get_run(run_id).data.tags.get("mlflow.runName", "")
        extra = {**tags, "test_set": name, "evaluated_on": name, "test_set_path": str(path),
                 "mlflow.runName": f"{title} on {name}"}
        logger.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in extra.items()], synchronous=True)
        logger.finish({"test": metrics, "leaderboard_metric": leaderboard_metric}, str(run_dir))
    retire_earlier_rows(logger.client, logger.client.get_run(run_id).info.experiment_id, str(run_dir), name, digest,
                        run_id)
    return run_id


def record_test_sets(spec: dict, result: dict, uri: Optional[str] = None, source: Optional[str] = None) -> list[str]:
    """The leaderboard rows of a finished ``result`` (``metrics.json``) on each of its test sets
    (``platform/test_sets.py``)."""
    ident = {k: result.get(k, "") for k in ("task", "dataset", "model", "encoder")}
    commit = result.get("git_commit")
    commit = commit if commit and commit != "unknown" else None
    return [record_test_set_row(spec, ident, result["spec_hash"], result["run_dir"], name, entry["data"],
                                entry["metrics"], entry.get("leaderboard_metric") or result.get("leaderboard_metric"),
                                entry.get("tracking_tags", result.get("tracking_tags") or {}), uri, commit,
                                source or result.get("source"), ext_vars=result.get("ext_vars"))
            for name, entry in (result.get("test_sets") or {}).items()]
