"""Ray machinery: sweeps over workers, a model-serving service, an evaluator pool, cluster jobs.

Domain-free: a trial is "train this resolved spec into this run directory"; a served model is
"an archive that turns ``{"text": ...}`` into JSON".

Tracking. Workers never write the MLflow store. A trial returns its result dict (what
``train_experiment`` wrote to ``metrics.json``) to the driver, and the driver alone calls
``tracking.replay``; evaluator actors return metrics and the driver logs the leaderboard rows.
One writer per store is what MLflow's SQLite backend needs (concurrent writers to one SQLite
file lock and fail), and it keeps workers free of database credentials. The alternative for a
cluster is one MLflow tracking server (``mlflow server --backend-store-uri ...``) whose
``http://`` URI is given to ``--tracking-uri``: the driver still does the logging here, but any
process of the cluster (e.g. ``multigrain train`` run as a Ray job) can log to the same server.

Placement. A trial asks Ray for ``num_cpus`` (default 1) and ``num_gpus``: the ``--resources``
value when given (fractions pack several trials on one GPU); otherwise 1 when the cluster has a
GPU resource (Ray detects CUDA devices on each node) and the spec does not pin the CPU with
``trainer.cuda_device: -1``; else 0. Ray sets ``CUDA_VISIBLE_DEVICES`` for a GPU trial, so the
trial sees its GPU as ``cuda:0``; a spec naming ``cuda_device >= 1`` is refused in a GPU sweep.
A CPU trial on a GPU node hides the GPUs from torch (and its worker is not reused).

Faults. Trials are Ray tasks with bounded ``max_retries`` for system failures (a worker or node
dies); a retried trial continues from its run directory's ``last.pt`` (bit-identical resume) or
starts over when the dead attempt saved none. Application errors (a bad spec, a NaN loss) are
not retried. ``sweep --resume`` skips trials whose spec hash has a FINISHED training run in
MLflow. Evaluator actors are created with ``max_restarts``/``max_task_retries``; Serve replicas
cannot take ``max_restarts`` (Serve forbids it) - the Serve controller health-checks replicas
and replaces one that dies, reloading its archive.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from multigrain.platform.errors import ConfigurationError, MultigrainError, SpecError


class RemoteError(MultigrainError):
    """A user-facing error raised on a worker, re-raised as a plain message: ``DataError`` and
    ``SpecError`` take constructor arguments that pickle cannot rebuild on the driver."""


RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources", "accelerator_type")


# ---------------------------------------------------------------------------- connecting
def check_reachable(address: str, timeout: float = 3.0) -> None:
    """A TCP connect to ``host:port`` (or ``ray://host:port``): one clear error instead of Ray's
    long retry loop when nothing listens there."""
    target = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigurationError(f"--address {address!r}: expected HOST:PORT (the head's GCS port, 6379 by "
                                 f"default), ray://HOST:10001, 'auto' or 'local'")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise ConfigurationError(f"--address {address}: cannot reach a Ray cluster there ({e.strerror or e}); "
                                 f"is the head running (ray start --head --port={port})?") from None


def patient_serve_defaults() -> None:
    """Before a local ``ray.init`` (its workers inherit the environment): give a Serve proxy 60 s,
    not 5, to report ready. On a loaded laptop or CI box the proxy's start-up takes longer than 5 s,
    the controller kills it, and ``serve.start`` fails with ActorDiedError. A value the user set
    stays."""
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")


def connect(address: Optional[str] = None, **local_kwargs) -> bool:
    """Attach this process to Ray. ``None``/``"local"`` starts Ray in-process; anything else
    joins a running cluster. Returns whether this call initialised Ray (then the caller shuts
    it down); an already-initialised Ray is reused as is."""
    import ray

    if ray.is_initialized():
        return False
    if address in (None, "", "local"):
        local_kwargs.setdefault("include_dashboard", False)
        local_kwargs.setdefault("log_to_driver", False)
        patient_serve_defaults()
        ray.init(address="local", **local_kwargs)
        return True
    if address.startswith(("http://", "https://")):
        raise ConfigurationError(f"--address {address}: that is a dashboard / Jobs API address (used by "
                                 f"`multigrain submit`); this command needs the cluster address HOST:6379")
    if address != "auto":
        check_reachable(address)
    try:
        ray.init(address=address, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigurationError(f"--address {address}: cannot connect to Ray: {e}") from None
    return True


def cluster_resources() -> dict[str, float]:
    import ray

    return dict(ray.cluster_resources())


# ---------------------------------------------------------------------------- sweep: planning
@dataclass
class Trial:
    """One (grid point, seed) of a sweep; its spec hash is its identity."""

    index: int
    point: tuple  # ((key, value), ...) of the grid, without the seed
    seed: int
    spec: dict
    spec_hash: str
    run_dir: str
    state: str = "PENDING"
    attempts: int = 0
    pid: Optional[int] = None
    epoch: int = 0
    metric: Optional[float] = None
    result: Optional[dict] = None
    error: Optional[str] = None
    run_id: Optional[str] = None

    @property
    def point_label(self) -> str:
        return ", ".join(f"{k.rsplit('.', 1)[-1]}={json.dumps(v)}" for k, v in self.point) or "(spec)"

    @property
    def label(self) -> str:
        return f"{self.point_label} seed={self.seed}"


def parse_grid(texts: list[str]) -> list[tuple[str, list]]:
    """``--grid trainer.optimizer.lr=[1e-3,3e-3]`` -> ``[("trainer.optimizer.lr", [0.001, 0.003])]``."""
    grid, problems, seen = [], [], set()
    for text in texts or []:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key:
            problems.append(f"--grid {text!r}: expected KEY.PATH=[VALUE,...], e.g. trainer.optimizer.lr=[1e-3,3e-3]")
            continue
        try:
            values = json.loads(raw)
        except json.JSONDecodeError as e:
            problems.append(f"--grid {key}: {raw!r} is not a JSON list ({e.msg}); write e.g. {key}=[1e-3,3e-3] "
                            f"and quote strings: {key}=[\"a\",\"b\"]")
            continue
        if not isinstance(values, list) or not values:
            problems.append(f"--grid {key}: expected a non-empty JSON list of values, got {raw!r}")
            continue
        if key in seen:
            problems.append(f"--grid {key}: given twice; put all its values in one list")
        seen.add(key)
        grid.append((key, values))
    if problems:
        raise SpecError(problems)
    return grid


def parse_resources(text: Optional[str]) -> Optional[dict]:
    """``--resources '{"num_cpus": 2, "num_gpus": 0.5}'``: Ray options of each trial."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigurationError(f"--resources {text!r}: not JSON ({e.msg}); e.g. '{{\"num_cpus\":1,\"num_gpus\":0}}'")
    if not isinstance(value, dict):
        raise ConfigurationError(f"--resources {text!r}: expected a JSON object")
    problems = [f"--resources: unknown key {k!r}; allowed: {', '.join(RESOURCE_KEYS)}" for k in value
                if k not in RESOURCE_KEYS]
    for k in ("num_cpus", "num_gpus", "memory"):
        v = value.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
            problems.append(f"--resources: {k} must be a number >= 0, got {json.dumps(v)}")
    if isinstance(value.get("num_gpus"), (int, float)) and value["num_gpus"] > 1 and value["num_gpus"] % 1:
        problems.append("--resources: num_gpus above 1 must be a whole number")
    if problems:
        raise ConfigurationError("\n".join(problems))
    return value


def expand_sweep(spec: dict, grid: list[tuple[str, list]], seeds: int, name: str,
                 runs_root: str | Path = "runs/sweeps") -> list[Trial]:
    """Grid x seeds -> resolved trials (seed key ``seed``: the spec's seed, +1, +2, ...);
    a grid key missing from the spec is an error naming the nearest keys."""
    from multigrain.platform.specs import apply_overrides, spec_hash

    if seeds < 1:
        raise ConfigurationError(f"--seeds {seeds}: expected at least 1")
    keys = [k for k, _ in grid]
    if "seed" in keys and seeds > 1:
        raise ConfigurationError("--grid seed=[...] and --seeds N > 1 both set the seed; use one of them")
    try:  # every key checked at once, with the first values
        apply_overrides(spec, [f"{k}={json.dumps(v[0])}" for k, v in grid])
    except SpecError as e:
        raise SpecError([re.sub(r"^override ", "--grid ", p) for p in e.problems]) from None
    base_seed = spec.get("seed", 13)
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        raise SpecError([f"seed: expected int, got {json.dumps(base_seed)}"])
    trials, by_hash = [], {}
    for combo in itertools.product(*[values for _, values in grid]):
        point = tuple(zip(keys, combo))
        resolved = apply_overrides(spec, [f"{k}={json.dumps(v)}" for k, v in point])
        for i in range(seeds):
            trial_spec = dict(resolved)
            if "seed" not in keys:
                trial_spec["seed"] = base_seed + i
            digest = spec_hash(trial_spec)
            trial = Trial(len(trials), point, trial_spec["seed"], trial_spec, digest,
                          str(Path(runs_root) / name / digest[:8]))
            if digest in by_hash:
                raise ConfigurationError(f"--grid: trials [{by_hash[digest].label}] and [{trial.label}] resolve to "
                                         f"the same spec (hash {digest[:12]}); remove the duplicate value")
            by_hash[digest] = trial
            trials.append(trial)
    return trials


def validate_trials(trials: list[Trial], source: Optional[str] = None) -> None:
    """Validate every trial's spec before anything runs; one SpecError for all of them (a
    problem shared by every trial is listed once)."""
    from multigrain.platform.experiment import validate_spec

    found: dict[str, list[str]] = {}
    for t in trials:
        try:
            validate_spec(t.spec)
        except SpecError as e:
            for p in e.problems:
                found.setdefault(p, []).append(t.label)
    if found:
        problems = [p if len(labels) == len(trials) else f"{p} (trials: {'; '.join(labels)})"
                    for p, labels in found.items()]
        raise SpecError(problems, source)


def finished_runs(trials: list[Trial], uri: Optional[str] = None) -> dict[str, Any]:
    """Spec hash -> its latest FINISHED training run in MLflow (evaluation rows excluded)."""
    from mlflow.tracking import MlflowClient

    from multigrain.platform import tracking
    from multigrain.platform.experiment import identity

    client = MlflowClient(tracking_uri=tracking.tracking_uri(uri))
    exp_ids = []
    for name in sorted({tracking.experiment_name(identity(t.spec)) for t in trials}):
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            exp_ids.append(exp.experiment_id)
    if not exp_ids:
        return {}
    out = {}
    for t in trials:
        runs = client.search_runs(exp_ids, filter_string=f"tags.spec_hash = '{t.spec_hash}' and "
                                                         f"attributes.status = 'FINISHED'",
                                  order_by=["attributes.start_time DESC"], max_results=20)
        runs = [r for r in runs if "evaluated_on" not in r.data.tags]
        if runs:
            out[t.spec_hash] = runs[0]
    return out


def result_from_run(run) -> dict:
    """The parts of a result dict the summary needs, read back from an MLflow run."""
    metrics = run.data.metrics
    lb = run.data.tags.get("leaderboard_metric", "")
    return {"validation": {k[len("validation_"):]: v for k, v in metrics.items() if k.startswith("validation_")},
            "test": {k[len("test_"):]: v for k, v in metrics.items() if k.startswith("test_")},
            "leaderboard_metric": lb[len("test_"):] if lb.startswith("test_") else None, "finished": True}


def plan_trials(trials: list[Trial], resume: bool, uri: Optional[str] = None) -> None:
    """``--resume``: mark trials already FINISHED in MLflow as SKIPPED. Without it, refuse
    run directories that already hold something (nothing is overwritten silently)."""
    if resume:
        done = finished_runs(trials, uri)
        for t in trials:
            if t.spec_hash in done:
                t.state, t.run_id = "SKIPPED", done[t.spec_hash].info.run_id
                t.result = result_from_run(done[t.spec_hash])
        return
    busy = [t.run_dir for t in trials if Path(t.run_dir).is_dir() and any(Path(t.run_dir).iterdir())]
    if busy:
        raise ConfigurationError(f"{len(busy)} trial run director{'ies' if len(busy) > 1 else 'y'} already exist "
                                 f"({', '.join(busy[:3])}{', ...' if len(busy) > 3 else ''}); pass --resume to skip "
                                 f"finished trials and continue the others, or delete them")


def trial_resources(requested: Optional[dict], spec: dict, cluster: dict[str, float]) -> dict:
    """Ray options of one trial (see the module docstring for the GPU rule)."""
    options: dict[str, Any] = {"num_cpus": 1}
    options.update(requested or {})
    if "num_gpus" not in options:
        device = (spec.get("trainer") or {}).get("cuda_device")
        cpu_pinned = isinstance(device, int) and device < 0
        options["num_gpus"] = 1 if cluster.get("GPU", 0) >= 1 and not cpu_pinned else 0
    return options


def check_placement(options: dict, trials: list[Trial], cluster: dict[str, float], local: bool) -> list[str]:
    """Errors that would otherwise leave tasks pending forever or put two trials on one GPU.
    Returns warnings (a remote cluster may still grow through its autoscaler)."""
    problems, warnings = [], []
    if options.get("num_gpus", 0) > 0:
        pinned = sorted({t.spec["trainer"].get("cuda_device") for t in trials
                         if isinstance((t.spec.get("trainer") or {}).get("cuda_device"), int)
                         and t.spec["trainer"]["cuda_device"] >= 1})
        if pinned:
            problems.append(f"trainer.cuda_device={pinned[0]}: in a sweep Ray assigns each trial its GPU, which "
                            f"the trial sees as cuda:0; set trainer.cuda_device to null or 0")
    for key, resource in (("num_cpus", "CPU"), ("num_gpus", "GPU")):
        want, have = options.get(key, 0) or 0, cluster.get(resource, 0)
        if want > have:
            text = f"each trial asks for {key}={want:g} but the cluster has {have:g} {resource}"
            (problems if local else warnings).append(text + ("" if local else "; waiting for the autoscaler"))
    if problems:
        raise ConfigurationError("\n".join(problems))
    return warnings


# ---------------------------------------------------------------------------- sweep: running
def run_trial(spec: dict, run_dir: str | Path, on_epoch: Optional[Callable] = None) -> dict:
    """Train one trial; continue the same trial from ``last.pt`` when an earlier attempt left
    one (a retried task), start over when it left only a partial directory."""
    from multigrain.platform import archive
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.experiment import train_experiment

    run_dir = Path(run_dir)
    resume = False
    if run_dir.is_dir() and any(run_dir.iterdir()):
        saved = run_dir / "config.json"
        if saved.exists() and spec_hash(archive.read_spec(run_dir)) != spec_hash(spec):
            raise ConfigurationError(f"{run_dir}: holds a run of another spec; not overwriting it")
        if saved.exists() and (run_dir / "last.pt").exists():
            resume = True
        else:
            shutil.rmtree(run_dir)
    return train_experiment(spec, run_dir, resume=resume, on_epoch=on_epoch)


class SweepMonitor:
    """A tiny actor the trials report to (start, pid, epoch metric); the driver polls it for
    the live table. Its calls are fire-and-forget, so a slow driver never slows a trial."""

    def __init__(self):
        self.trials: dict[int, dict] = {}

    def started(self, index: int, pid: int, node: str, gpu_ids: list) -> None:
        rec = self.trials.setdefault(index, {"attempts": 0})
        rec.update(attempts=rec["attempts"] + 1, pid=pid, node=node, gpu_ids=gpu_ids, epoch=0, metric=None)

    def epoch(self, index: int, epoch: int, metric: Optional[float]) -> None:
        self.trials.setdefault(index, {"attempts": 0}).update(epoch=epoch, metric=metric)

    def snapshot(self) -> dict[int, dict]:
        return self.trials


def _trial_task(spec: dict, run_dir: str, index: int, monitor, cwd: str, hide_gpus: bool,
                include_packages: tuple = ()) -> dict:
    """What a Ray worker runs for one trial."""
    import ray

    os.environ["MULTIGRAIN_QUIET"] = "1"
    if os.path.isdir(cwd):
        os.chdir(cwd)  # relative data paths and run dirs mean what they meant to the driver
    gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    if hide_gpus and not gpu_ids:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if include_packages:
        from multigrain.platform.registry import import_package

        for name in include_packages:
            import_package(name)
    node = ray.get_runtime_context().get_node_id()
    monitor.started.remote(index, os.getpid(), node, gpu_ids)
    metric_key = "validation_" + str((spec.get("trainer") or {}).get("validation_metric", "+f1"))[1:]

    def on_epoch(epoch: int, record: dict) -> None:
        monitor.epoch.remote(index, epoch, record.get(metric_key))

    try:
        result = run_trial(spec, run_dir, on_epoch=on_epoch)
    except MultigrainError as e:
        raise RemoteError(str(e)) from None
    result["placement"] = {"pid": os.getpid(), "node": node, "gpu_ids": gpu_ids,
                           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    return result


def _error_text(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, MultigrainError):
        return str(cause)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__.rsplit('.', 1)[-1]}: {cause}".strip()
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def run_sweep(trials: list[Trial], options: dict, max_retries: int = 2, uri: Optional[str] = None,
              on_update: Optional[Callable[[list[Trial]], None]] = None, poll: float = 0.5,
              include_packages: tuple = ()) -> list[Trial]:
    """Run every PENDING trial as a Ray task and log each finished one from this process."""
    import ray
    from ray.exceptions import RayError

    from multigrain.platform import tracking

    monitor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(SweepMonitor).remote()
    remote_options = dict(options)
    hide_gpus = cluster_resources().get("GPU", 0) > 0 and not options.get("num_gpus")
    if hide_gpus:
        remote_options["max_calls"] = 1  # a worker that hid its GPUs from torch is not reused
    task = ray.remote(max_retries=max_retries, retry_exceptions=False, **remote_options)(_trial_task)
    cwd = os.getcwd()
    pending = {}
    for t in trials:
        if t.state == "PENDING":
            pending[task.remote(t.spec, t.run_dir, t.index, monitor, cwd, hide_gpus, tuple(include_packages))] = t
            t.state = "QUEUED"
    by_index = {t.index: t for t in trials}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=poll)
            for ref in done:
                t = pending.pop(ref)
                try:
                    t.result = ray.get(ref)
                except RayError as e:
                    t.state, t.error = "FAILED", _error_text(e)
                    continue
                t.state = "FINISHED" if t.result.get("finished") else "STOPPED"
                try:
                    t.run_id = tracking.replay(t.result, t.spec, uri)
                except Exception as e:  # the run directory still holds the result
                    t.error = f"trained, but logging to MLflow failed: {e}"
            try:
                snapshot = ray.get(monitor.snapshot.remote(), timeout=10)
            except RayError:
                snapshot = {}
            for index, rec in snapshot.items():
                t = by_index[index]
                t.attempts, t.pid, t.epoch = rec["attempts"], rec.get("pid"), rec.get("epoch", 0)
                t.metric = rec.get("metric")
                if t.state == "QUEUED":
                    t.state = "RUNNING"
                if t.state == "RUNNING" and t.attempts > 1:
                    t.state = "RETRYING"
            if on_update:
                on_update(trials)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        ray.kill(monitor)
    return trials


# ---------------------------------------------------------------------------- sweep: reporting
def _metric_name(trials: list[Trial]) -> tuple[str, float]:
    text = str((trials[0].spec.get("trainer") or {}).get("validation_metric", "+f1"))
    return text[1:], (1.0 if text[0] == "+" else -1.0)


def _mean_std(values: list[float]) -> tuple[Optional[float], Optional[float]]:
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize(trials: list[Trial]) -> list[dict]:
    """Grid points ranked by mean validation metric over seeds (best first), with the std and
    the mean/std of every test metric (loss aside)."""
    name, sign = _metric_name(trials)
    groups: dict[tuple, list[Trial]] = {}
    for t in trials:
        groups.setdefault(t.point, []).append(t)
    rows = []
    for point, members in groups.items():
        done = [t for t in members if t.result and t.result.get("validation") is not None]
        vals = [t.result["validation"][name] for t in done if name in t.result["validation"]]
        mean, std = _mean_std(vals)
        test_keys = sorted({k for t in done for k in (t.result.get("test") or {}) if k != "loss"})
        test = {k: _mean_std([t.result["test"][k] for t in done if k in (t.result.get("test") or {})])
                for k in test_keys}
        rows.append({"point": dict(point), "label": members[0].point_label, "seeds": len(members),
                     "completed": len(vals), "metric": name, "mean": mean, "std": std, "test": test,
                     "spec_hashes": [t.spec_hash for t in members]})
    rows.sort(key=lambda r: (r["mean"] is None, -sign * (r["mean"] if r["mean"] is not None else 0.0)))
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank
    return rows


def _fmt(mean: Optional[float], std: Optional[float]) -> str:
    if mean is None:
        return "-"
    scale = 100.0 if abs(mean) <= 1.0 and (std is None or std <= 1.0) else 1.0
    return f"{scale * mean:.2f} ± {scale * (std or 0.0):.2f}"


def trials_table(trials: list[Trial]):
    from rich.table import Table

    name, _ = _metric_name(trials)
    table = Table(title="sweep trials")
    for col in ("#", "trial", "state", "try", "epoch", f"dev {name}", "spec hash"):
        table.add_column(col, justify="right" if col in ("#", "try", "epoch", f"dev {name}") else "left")
    for t in trials:
        metric = t.metric
        if t.result and t.result.get("validation"):
            metric = t.result["validation"].get(name, metric)
        table.add_row(str(t.index), t.label, t.state + (" !" if t.error else ""), str(t.attempts or ""),
                      str(t.epoch or ""), "-" if metric is None else f"{metric:.4f}", t.spec_hash[:8])
    return table


def print_summary(trials: list[Trial], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=160)
    rows = summarize(trials)
    test_keys = sorted({k for r in rows for k in r["test"]})
    table = Table(title=f"sweep summary: mean ± std over seeds, ranked by dev {rows[0]['metric'] if rows else ''}")
    for col in ("rank", "grid point", "seeds", f"dev {rows[0]['metric'] if rows else ''}", *[f"test {k}" for k in test_keys]):
        table.add_column(col, justify="left" if col == "grid point" else "right")
    for r in rows:
        table.add_row(str(r["rank"]), r["label"], f"{r['completed']}/{r['seeds']}", _fmt(r["mean"], r["std"]),
                      *[_fmt(*r["test"].get(k, (None, None))) for k in test_keys])
    console.print(table)
    for t in trials:
        if t.error:
            console.print(f"[{t.label}] {t.state}: {t.error}", markup=False, highlight=False)


# ---------------------------------------------------------------------------- archives
def check_archives(run_dirs: list[str], data_paths: tuple = ()) -> dict[str, str]:
    """Name -> run dir for every archive (names unique and URL-safe); every missing archive or
    data file in one error, before Ray starts."""
    problems, names = [], {}
    for rd in run_dirs:
        path = Path(rd)
        if not (path / "config.json").exists():
            problems.append(f"{rd}: not a multigrain run directory (no config.json)")
        elif not (path / "best.pt").exists():
            problems.append(f"{rd}: no best.pt (did its training finish an epoch?)")
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().name) or "model"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names[name] = str(path.resolve())
    problems += [f"--data {p}: file not found" for p in data_paths if not Path(p).is_file()]
    if problems:
        raise ConfigurationError("\n".join(problems))
    return names


def _gpus_per_model(requested: Optional[float]) -> float:
    if requested is not None:
        return requested
    return 1.0 if cluster_resources().get("GPU", 0) >= 1 else 0.0


# ---------------------------------------------------------------------------- serving
class ArchivePredictor:
    """A Serve replica holding one archive's model: ``POST {"instances": [{"text": ...}]}`` ->
    ``{"predictions": [...]}``, the same JSON as ``archive.predict_batches``."""

    def __init__(self, run_dir: str, batch_size: int = 64):
        from multigrain.platform.archive import load_archive

        self.archive = load_archive(run_dir)
        self.batch_size = batch_size

    def predict(self, payload: Any) -> dict:
        instances = payload.get("instances") if isinstance(payload, dict) else None
        if not isinstance(instances, list) or not all(isinstance(x, dict) for x in instances):
            raise ValueError('expected a JSON body {"instances": [{"text": ...}, ...]}')
        model = self.archive.model
        built = []
        for n, data in enumerate(instances):
            try:
                built.append(model.text_to_instance(data))
            except (KeyError, ValueError) as e:
                raise ValueError(f"instances[{n}]: cannot make an example: {e}") from None
        return {"predictions": list(self.archive.predict_batches(built, self.batch_size))}

    async def __call__(self, request):
        from starlette.responses import JSONResponse

        if request.method != "POST":
            return JSONResponse({"error": 'POST a JSON body {"instances": [{"text": ...}]}'}, status_code=405)
        try:
            payload = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        try:
            return JSONResponse(self.predict(payload))
        except (ValueError, MultigrainError) as e:
            return JSONResponse({"error": str(e)}, status_code=400)


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            raise ConfigurationError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None


def start_service(named: dict[str, str], host: str = "127.0.0.1", port: int = 8000, replicas: int = 1,
                  num_cpus: float = 1.0, num_gpus: Optional[float] = None) -> dict[str, str]:
    """One Serve application per archive at ``/predict/<name>``; returns name -> URL."""
    from ray import serve

    gpus = _gpus_per_model(num_gpus)
    serve.start(http_options={"host": host, "port": port})
    urls = {}
    for name, run_dir in named.items():
        deployment = serve.deployment(ArchivePredictor, name="predictor", num_replicas=replicas,
                                      ray_actor_options={"num_cpus": num_cpus, "num_gpus": gpus})
        serve.run(deployment.bind(run_dir), name=name, route_prefix=f"/predict/{name}")
        urls[name] = f"http://{host}:{port}/predict/{name}"
    return urls


# ---------------------------------------------------------------------------- evaluation pool
class ArchiveEvaluator:
    """An actor that keeps archives loaded and evaluates them on data files."""

    def __init__(self):
        self.archives: dict[str, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, run_dir: str, data_path: str, batch_size: int = 64) -> dict:
        from multigrain.platform.archive import load_archive
        from multigrain.platform.batching import DataLoaderConfig
        from multigrain.platform.experiment import batches_for
        from multigrain.platform.training import evaluate

        os.environ["MULTIGRAIN_QUIET"] = "1"
        try:
            if run_dir not in self.archives:
                self.archives[run_dir] = load_archive(run_dir)
            archive = self.archives[run_dir]
            instances = archive.read(data_path)
        except MultigrainError as e:
            raise RemoteError(str(e)) from None
        batches = batches_for(archive.model, instances, DataLoaderConfig(batch_size=batch_size), 0, False)
        metrics = evaluate(archive.model, batches, archive.device, desc=f"evaluate {data_path}")
        return {"run_dir": run_dir, "data": data_path, "examples": len(instances), "metrics": metrics,
                "leaderboard_metric": getattr(archive.model, "leaderboard_metric", None), "pid": os.getpid()}


def evaluator_pool(n: int, num_cpus: float = 1.0, num_gpus: float = 0.0, max_restarts: int = 2) -> list:
    """``n`` evaluator actors; one that dies is restarted (archives reloaded on demand) and the
    call it was running is retried."""
    import ray

    cls = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=max_restarts,
                     max_task_retries=max_restarts)(ArchiveEvaluator)
    return [cls.remote() for _ in range(n)]


def evaluate_all(run_dirs: list[str], data_paths: list[str], actors: Optional[int] = None, num_cpus: float = 1.0,
                 num_gpus: Optional[float] = None, max_restarts: int = 2, batch_size: int = 64) -> list[dict]:
    """Every archive on every data file, over a pool of evaluator actors (each archive always
    goes to the same actor, which loads it once). Rows with an ``error`` failed."""
    import ray
    from ray.exceptions import RayError

    named = check_archives(run_dirs, data_paths)
    gpus = _gpus_per_model(num_gpus)
    cluster = cluster_resources()
    limit = [len(named), max(1, int(cluster.get("CPU", 1) // max(num_cpus, 1e-9)))]
    if gpus > 0:
        limit.append(max(1, int(cluster.get("GPU", 0) // gpus)))
    pool = evaluator_pool(max(1, min(actors or len(named), *limit)), num_cpus, gpus, max_restarts)
    n = len(pool)
    jobs = {}
    for i, run_dir in enumerate(named.values()):
        for data in data_paths:
            ref = pool[i % n].evaluate.remote(run_dir, str(Path(data).resolve()), batch_size)
            jobs[ref] = (run_dir, data)
    rows = []
    try:
        for ref, (run_dir, data) in jobs.items():
            try:
                row = ray.get(ref)
                row["data"] = data
            except RayError as e:
                row = {"run_dir": run_dir, "data": data, "error": _error_text(e)}
            rows.append(row)
    finally:
        for actor in pool:
            ray.kill(actor)
    return rows


def record_evaluations(rows: list[dict], uri: Optional[str] = None) -> None:
    """Log each successful row as a leaderboard run (``leaderboard=true``, ``evaluated_on``);
    metrics as ``test_<name>`` so ``multigrain leaderboard`` ranks them."""
    from multigrain.platform.archive import read_spec
    from multigrain.platform.specs import spec_hash
    from multigrain.platform.experiment import identity
    from multigrain.platform.tracking import RunLogger

    for row in rows:
        if "error" in row:
            continue
        spec = read_spec(Path(row["run_dir"]))
        ident, digest = identity(spec), spec_hash(spec)
        logger = RunLogger(uri)
        run_id = logger.start(spec, ident, digest, row["run_dir"], leaderboard=True)
        logger.client.set_tag(run_id, "evaluated_on", row["data"])
        logger.client.set_tag(run_id, "mlflow.runName", f"eval-{ident['model']}-{digest[:8]}-{Path(row['data']).name}")
        logger.finish({"test": row["metrics"], "leaderboard_metric": row.get("leaderboard_metric")}, row["run_dir"])
        row["run_id"] = run_id


def print_evaluations(rows: list[dict], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=160)
    keys = sorted({k for r in rows for k in r.get("metrics", {})})
    table = Table(title="evaluate-all")
    for col in ("run dir", "data", "examples", *keys):
        table.add_column(col, justify="left" if col in ("run dir", "data") else "right")
    for r in rows:
        if "error" in r:
            table.add_row(Path(r["run_dir"]).name, r["data"], "error", *["-" for _ in keys])
            continue
        m = r["metrics"]
        table.add_row(Path(r["run_dir"]).name, r["data"], str(r["examples"]),
                      *[f"{m[k]:.4f}" if k in m else "-" for k in keys])
    console.print(table)
    for r in rows:
        if "error" in r:
            console.print(f"{r['run_dir']} on {r['data']}: {r['error']}", markup=False, highlight=False)


# ---------------------------------------------------------------------------- cluster jobs
def auth_headers() -> Optional[dict]:
    """The Ray token as an HTTP header, found where Ray looks (``RAY_AUTH_TOKEN``,
    ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) - the rule ``ray start`` applies: a token
    that exists is used unless ``RAY_AUTH_MODE`` says otherwise (then Ray's client decides)."""
    if os.environ.get("RAY_AUTH_MODE"):
        return None
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if not token:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
        try:
            token = path.read_text().strip()
        except OSError:
            return None
    return {"Authorization": f"Bearer {token}"} if token else None


def _jobs_api(address: str):
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address, headers=auth_headers())


def job_client(address: str):
    from ray.exceptions import AuthenticationError

    if not address.startswith(("http://", "https://")):
        raise ConfigurationError(f"--address {address}: the Jobs API address is the head's dashboard URL, "
                                 f"e.g. http://HEAD:8265")
    try:
        return _jobs_api(address)
    except AuthenticationError:
        raise ConfigurationError(f"--address {address}: the cluster wants its auth token: put it in "
                                 f"~/.ray/auth_token or RAY_AUTH_TOKEN (see `ray get-auth-token`)") from None
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigurationError(f"--address {address}: cannot reach the Ray Jobs API ({first}); is the head's "
                                 f"dashboard running (ray start --head --include-dashboard=true)?") from None


def submission_id(digest: str) -> str:
    return f"multigrain-{digest[:16]}"


def job_entrypoint(spec: dict, name: str, run_dir: Optional[str] = None, tracking_uri: Optional[str] = None,
                   cwd: Optional[str] = None) -> str:
    """The job's shell command: (``cd`` to ``cwd``,) write the resolved spec - shipped inline as
    ASCII JSON - under ``.multigrain/jobs/``, then ``multigrain train`` it. Relative paths in the
    spec (data, run dir) are relative to that directory: ``cwd``, else the runtime env's
    ``working_dir``, else where the cluster runs job drivers."""
    from multigrain.platform.specs import spec_hash

    digest = spec_hash(spec)
    spec_file = f".multigrain/jobs/{name}-{digest[:8]}.json"
    run_dir = run_dir or f"runs/jobs/{name}-{digest[:8]}"
    text = json.dumps(spec, sort_keys=True, ensure_ascii=True)
    train = ["multigrain", "train", spec_file, "-s", run_dir]
    if tracking_uri:
        train += ["--tracking-uri", tracking_uri]
    prefix = ""
    if cwd:
        home, _, rest = cwd.partition("/") if cwd.startswith("~") else ("", "", cwd)
        if home not in ("", "~"):
            raise ConfigurationError(f"--cwd {cwd}: only ~/... is expanded; give an absolute path")
        prefix = f"cd {'~/' if home else ''}{shlex.quote(rest) if rest else ''} && "
    return (f"{prefix}mkdir -p .multigrain/jobs && printf '%s' {shlex.quote(text)} > {spec_file} && "
            + " ".join(shlex.quote(a) for a in train))


def _status_text(status) -> str:
    return str(getattr(status, "value", status))


def submit_job(address: str, spec: dict, name: str, runtime_env: Optional[dict] = None,
               run_dir: Optional[str] = None, tracking_uri: Optional[str] = None, num_cpus: float = 1,
               num_gpus: float = 0, retry_failed: bool = False, cwd: Optional[str] = None) -> tuple[str, bool, str]:
    """Submit ``multigrain train`` of a resolved spec; the submission id is derived from the
    spec hash, so a second submission finds the first job instead of starting another.
    Returns (submission id, whether a job was started now, its status)."""
    from multigrain.platform.specs import spec_hash

    client = job_client(address)
    digest = spec_hash(spec)
    sid = submission_id(digest)
    runtime_env = dict(runtime_env or {})
    runtime_env["env_vars"] = {"MULTIGRAIN_QUIET": "1", **(runtime_env.get("env_vars") or {})}  # no progress bars
    kwargs = dict(entrypoint=job_entrypoint(spec, name, run_dir, tracking_uri, cwd), submission_id=sid,
                  runtime_env=runtime_env, metadata={"spec_hash": digest, "spec": name},
                  entrypoint_num_cpus=num_cpus, entrypoint_num_gpus=num_gpus or None)
    try:
        client.submit_job(**kwargs)
        return sid, True, "PENDING"
    except RuntimeError as e:
        if "already exists" not in str(e):
            raise ConfigurationError(f"job submission to {address} failed: {e}") from None
    status = _status_text(client.get_job_status(sid))
    if retry_failed and status in ("FAILED", "STOPPED"):
        client.delete_job(sid)
        client.submit_job(**kwargs)
        return sid, True, "PENDING"
    return sid, False, status


def wait_for_job(address: str, sid: str, timeout: float = 3600, poll: float = 2.0) -> str:
    client = job_client(address)
    deadline = time.time() + timeout
    while True:
        status = _status_text(client.get_job_status(sid))
        if status in ("SUCCEEDED", "FAILED", "STOPPED") or time.time() > deadline:
            return status
        time.sleep(poll)


def list_jobs(address: str, everything: bool = False) -> list[dict]:
    rows = []
    for job in job_client(address).list_jobs():
        sid = job.submission_id or ""
        if not everything and not sid.startswith("multigrain-"):
            continue
        rows.append({"submission_id": sid, "status": _status_text(job.status), "entrypoint": job.entrypoint,
                     "spec": (job.metadata or {}).get("spec", ""), "message": job.message or "",
                     "start_time": job.start_time, "end_time": job.end_time})
    return sorted(rows, key=lambda r: r["start_time"] or 0)


def job_details(address: str, sid: str, logs: bool = False) -> dict:
    client = job_client(address)
    try:
        info = client.get_job_info(sid)
    except RuntimeError:
        raise ConfigurationError(f"no job {sid!r} at {address} (see `multigrain jobs --address {address}`)") from None
    out = {"submission_id": sid, "status": _status_text(info.status), "message": info.message or "",
           "entrypoint": info.entrypoint, "metadata": info.metadata or {}}
    if logs:
        out["logs"] = client.get_job_logs(sid)
    return out


def load_runtime_env(path: Optional[str], working_dir: Optional[str] = None) -> Optional[dict]:
    """A runtime env YAML (``ray_cluster/runtime_env.yaml``); a relative ``working_dir`` is
    taken relative to the current directory, as Ray does."""
    env: dict = {}
    if path:
        import yaml

        p = Path(path)
        if not p.exists():
            raise ConfigurationError(f"--runtime-env {path}: file not found")
        env = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        if not isinstance(env, dict):
            raise ConfigurationError(f"--runtime-env {path}: expected a mapping of runtime env fields")
    if working_dir:
        env["working_dir"] = working_dir
    if env.get("working_dir") and not str(env["working_dir"]).startswith(("s3://", "gs://", "https://")):
        wd = Path(env["working_dir"])
        if not wd.is_dir():
            raise ConfigurationError(f"runtime env working_dir {wd}: not a directory")
        env["working_dir"] = str(wd.resolve())
    return env or None


# ---------------------------------------------------------------------------- a private head
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LocalHead:
    """A Ray head of our own (tests, benchmarks, one-machine job submission), started with
    ``ray start --head --block`` in a new session on private ports and a private temp dir.

    Stopping never uses ``ray stop`` (which stops every Ray of the machine): SIGTERM to the
    ``ray start --block`` process makes it kill the processes it started (GCS, raylet,
    dashboard, their workers); then anything left in the process group it leads - only
    processes of this head - gets SIGKILL."""

    temp_dir: str
    port: int
    dashboard_port: int
    process: Any = None
    log: Any = None
    owns_temp_dir: bool = False
    extra_env: dict = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @classmethod
    def start(cls, num_cpus: int = 1, temp_dir: Optional[str] = None, env: Optional[dict] = None,
              cwd: Optional[str] = None, timeout: float = 90.0) -> "LocalHead":
        owns = temp_dir is None
        temp_dir = temp_dir or tempfile.mkdtemp(prefix="mgray-", dir="/tmp")  # short: socket paths
        head = cls(temp_dir, free_port(), free_port(), owns_temp_dir=owns, extra_env=dict(env or {}))
        ray_bin = Path(sys.executable).with_name("ray")
        cmd = [str(ray_bin), "start", "--head", "--block", f"--port={head.port}",
               f"--dashboard-port={head.dashboard_port}", "--dashboard-host=127.0.0.1", "--include-dashboard=true",
               f"--temp-dir={temp_dir}", f"--num-cpus={num_cpus}", "--num-gpus=0", "--disable-usage-stats",
               f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
               f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}"]
        full_env = dict(os.environ)
        full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
        full_env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "0"
        full_env.pop("RAY_ADDRESS", None)
        full_env.update(head.extra_env)
        head.log = open(Path(temp_dir) / "ray_start.log", "wb")
        head.process = subprocess.Popen(cmd, stdout=head.log, stderr=subprocess.STDOUT, env=full_env,
                                        cwd=cwd or temp_dir, start_new_session=True)
        try:
            head.wait_ready(timeout)
        except BaseException:
            head.stop()
            raise
        return head

    def wait_ready(self, timeout: float) -> None:
        """Until the Jobs API answers (the client carries the cluster's auth token)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.process.returncode}: {self.read_log()[-2000:]}")
            try:
                _jobs_api(self.dashboard_url).list_jobs()
                return
            except (ConnectionError, RuntimeError, OSError, ValueError):
                time.sleep(0.5)
        raise TimeoutError(f"the Ray head did not come up in {timeout:.0f} s: {self.read_log()[-2000:]}")

    def read_log(self) -> str:
        try:
            return (Path(self.temp_dir) / "ray_start.log").read_text(errors="replace")
        except OSError:
            return ""

    def leftover_pids(self) -> list[int]:
        """Live processes whose command line names this head's temp dir (Linux /proc)."""
        needle = self.temp_dir.encode()
        pids = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                if needle in (entry / "cmdline").read_bytes() and int(entry.name) != os.getpid():
                    pids.append(int(entry.name))
            except (OSError, ValueError):
                continue
        return pids

    def stop(self, grace: float = 20.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # our own session: only this head's processes
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.leftover_pids():  # e.g. workers the raylet put in process groups of their own
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.log is not None:
            self.log.close()
            self.log = None
        if self.owns_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
