"""Sweeps: a grid x seeds of one spec, each trial a Ray task that trains into its own run
directory; the driver logs every finished trial to MLflow (see the package docstring).

Placement. A trial asks Ray for ``num_cpus`` (default 1) and ``num_gpus``: ``--gpus-per-trial`` or
``--resources`` when given (0.25: four trials at once on one GPU, each a process seeing it as
``cuda:0``; where torch has no CUDA they train on the CPU); otherwise 1 when the cluster has a
GPU resource (Ray detects CUDA devices on each node) and the spec does not pin the CPU with
``trainer.cuda_device: -1``; else 0. Ray sets ``CUDA_VISIBLE_DEVICES`` for a GPU trial, so the
trial sees its GPU as ``cuda:0``; a spec naming ``cuda_device >= 1`` is refused in a GPU sweep.
A CPU trial on a GPU node hides the GPUs from torch (and its worker is not reused).

Faults. Trials are Ray tasks with bounded ``max_retries`` for system failures (a worker or node
dies); a retried trial continues from its run directory's ``last.pt`` (bit-identical resume) or
starts over when the dead attempt saved none. Application errors (a bad spec, a NaN loss) are
not retried. ``sweep --resume`` skips trials whose spec hash has a FINISHED training run in
MLflow.

The ranking and tables of a sweep's results are in ``sweep_report``; the command's options
(``--grid``, ``--resources``, ``--gpus-per-trial``) are read in ``sweep_options``.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from multigrain.platform.errors import ConfigurationError, MultigrainError, Problem, SpecError
from multigrain.platform.ray.cluster import RemoteError, cluster_resources, monitored_rounds

#: the most trials one sweep plans (grid points x seeds): a larger grid is refused, not expanded
MAX_TRIALS = 1000

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
    progress: Optional[str] = None  # the latest progress line of its training (``progress.set_line_listener``)

    @property
    def point_label(self) -> str:
        """``lr=0.01``: each grid key by its last part, or by as many last parts as tell the
        point's keys apart (``1.lr=0.0002, optimizer.lr=0.003``)."""
        keys = [k for k, _ in self.point]
        parts = 1
        while len({".".join(k.split(".")[-parts:]) for k in keys}) < len(keys):
            parts += 1
        return ", ".join(f"{'.'.join(k.split('.')[-parts:])}={json.dumps(v)}" for k, v in self.point) or "(spec)"

    @property
    def label(self) -> str:
        return f"{self.point_label} seed={self.seed}"


def expand_sweep(spec: dict, grid: list[tuple[str, list]], seeds: int, name: str,
                 runs_root: str | Path = "runs/sweeps") -> list[Trial]:
    """Grid x seeds -> resolved trials (seed key ``seed``: the spec's seed, +1, +2, ...);
    a grid key missing from the spec is an error naming the nearest keys."""
    from multigrain.platform.specs import apply_overrides, spec_hash

    if seeds < 1:
        raise ConfigurationError(f"--seeds {seeds}: expected at least 1")
    count = math.prod(len(values) for _, values in grid) * seeds
    if count > MAX_TRIALS:
        raise ConfigurationError(f"--grid: {count:,} trials ({' x '.join(str(len(v)) for _, v in grid) or '1'} points "
                                 f"x {seeds} seed{'s' if seeds > 1 else ''}); a sweep runs at most {MAX_TRIALS:,}: "
                                 f"split it into smaller sweeps")
    keys = [k for k, _ in grid]
    if "seed" in keys and seeds > 1:
        raise ConfigurationError("--grid seed=[...] and --seeds N > 1 both set the seed; use one of them")
    try:  # every key checked at once, with the first values
        apply_overrides(spec, [f"{k}={json.dumps(v[0])}" for k, v in grid])
    except SpecError as e:
        raise SpecError([p.at(re.sub(r"^override ", "--grid ", p.path)) for p in e.problems]) from None
    base_seed = spec.get("seed", 13)
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        raise SpecError([Problem("seed", f"expected int, got {json.dumps(base_seed)}", "type")])
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
        problems = [p if len(labels) == len(trials) else Problem(p.path, f"{p.message} (trials: {'; '.join(labels)})",
                                                                  p.kind)
                    for p, labels in found.items()]
        raise SpecError(problems, source)


def finished_runs(trials: list[Trial], uri: Optional[str] = None) -> dict[str, Any]:
    """Spec hash -> its latest FINISHED training run in MLflow (evaluation rows excluded)."""

    from multigrain.platform import tracking
    from multigrain.platform.experiment import identity

    client = tracking.open_store(tracking.tracking_uri(uri), create=False)
    if client is None:
        return {}
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
        from multigrain.platform.training import trainer_settings

        device = trainer_settings(spec).cuda_device
        cpu_pinned = device is not None and device < 0
        options["num_gpus"] = 1 if cluster.get("GPU", 0) >= 1 and not cpu_pinned else 0
    return options


def check_placement(options: dict, trials: list[Trial], cluster: dict[str, float], local: bool) -> list[str]:
    """Errors that would otherwise leave tasks pending forever or put two trials on one GPU.
    Returns warnings (a remote cluster may still grow through its autoscaler)."""
    problems, warnings = [], []
    if options.get("num_gpus", 0) > 0:
        from multigrain.platform.training import trainer_settings

        devices = (trainer_settings(t.spec).cuda_device for t in trials)
        pinned = sorted({d for d in devices if d is not None and d >= 1})
        if pinned:
            problems.append(f"trainer.cuda_device={pinned[0]}: in a sweep Ray assigns each trial its GPU, which "
                            f"the trial sees as cuda:0; set trainer.cuda_device to null or 0")
    wanted = [(key, resource, options.get(key, 0) or 0)
              for key, resource in (("num_cpus", "CPU"), ("num_gpus", "GPU"))]
    wanted += [(f"resources.{name}", name, amount) for name, amount in (options.get("resources") or {}).items()]
    if options.get("memory"):
        wanted.append(("memory", "memory", options["memory"]))
    if options.get("accelerator_type"):
        wanted.append(("accelerator_type", f"accelerator_type:{options['accelerator_type']}", 0.001))
    for key, resource, want in wanted:
        have = cluster.get(resource, 0)
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
    from multigrain.platform.ray.train import RayTrainCluster
    from multigrain.platform.runs import Run

    # no epoch lines: Ray would forward every trial's to the driver, under its live table; a trial
    # with trainer.workers above 1 trains on Ray Train in the Ray it runs in
    return Run(spec, run_dir).train_or_reuse(on_epoch=on_epoch, extend_siblings=False, epoch_lines=False,
                                             data_parallel=RayTrainCluster().launcher)


class SweepMonitor:
    """A tiny actor the trials report to (start, pid, epoch metric); the driver polls it for
    the live table. Its calls are fire-and-forget, so a slow driver never slows a trial."""

    def __init__(self):
        self.trials: dict[int, dict] = {}

    def started(self, index: int, pid: int, node: str, gpu_ids: list) -> None:
        rec = self.trials.setdefault(index, {"attempts": 0})
        rec.update(attempts=rec["attempts"] + 1, pid=pid, node=node, gpu_ids=gpu_ids, epoch=0, metric=None,
                   line=None)

    def epoch(self, index: int, epoch: int, metric: Optional[float]) -> None:
        self.trials.setdefault(index, {"attempts": 0}).update(epoch=epoch, metric=metric)

    def line(self, index: int, text: str) -> None:
        """The trial's latest progress line (``progress.set_line_listener``)."""
        self.trials.setdefault(index, {"attempts": 0})["line"] = text

    def snapshot(self) -> dict[int, dict]:
        return self.trials


def _trial_task(spec: dict, run_dir: str, index: int, monitor, cwd: str, hide_gpus: bool,
                included: list = ()) -> dict:
    """What a Ray worker runs for one trial; ``included``: the user's plugins (``plugins.travelling``)."""
    import ray

    os.environ["MULTIGRAIN_QUIET"] = "1"
    if os.path.isdir(cwd):
        os.chdir(cwd)  # relative data paths and run dirs mean what they meant to the driver
    gpu_ids = [str(g) for g in ray.get_gpu_ids()]
    if hide_gpus and not gpu_ids:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    if included:  # the user's --include-package list, from where the driver found each (never a run's)
        from multigrain.platform.plugins import include_travelled

        include_travelled(included)
    node = ray.get_runtime_context().get_node_id()
    started = time.time()
    monitor.started.remote(index, os.getpid(), node, gpu_ids)
    from multigrain.platform.training import trainer_settings

    metric_key = "validation_" + trainer_settings(spec).metric_name

    def on_epoch(epoch: int, record: dict) -> None:
        monitor.epoch.remote(index, epoch, record.get(metric_key))

    from multigrain.platform.progress import set_line_listener

    previous = set_line_listener(lambda text: monitor.line.remote(index, text))
    try:
        result = run_trial(spec, run_dir, on_epoch=on_epoch)
    except MultigrainError as e:
        raise RemoteError(str(e)) from None
    finally:
        set_line_listener(previous)
    result["placement"] = {"pid": os.getpid(), "node": node, "gpu_ids": gpu_ids,
                           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                           "started": started, "finished": time.time()}
    return result


def run_sweep(trials: list[Trial], options: dict, max_retries: int = 2, uri: Optional[str] = None,
              on_update: Optional[Callable[[list[Trial]], None]] = None, poll: float = 0.5,
              include_packages: tuple = ()) -> list[Trial]:
    """Run every PENDING trial as a Ray task and log each finished one from this process. The
    trials import the plugins the user included here (``include_packages``: their names; see
    ``plugins.travelling``)."""
    import ray

    from multigrain.platform import tracking
    from multigrain.platform.plugins import travelling

    monitor = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(SweepMonitor).remote()
    remote_options = dict(options)
    hide_gpus = cluster_resources().get("GPU", 0) > 0 and not options.get("num_gpus")
    if hide_gpus:
        remote_options["max_calls"] = 1  # a worker that hid its GPUs from torch is not reused
    task = ray.remote(max_retries=max_retries, retry_exceptions=False, **remote_options)(_trial_task)
    cwd = os.getcwd()
    included = travelling(include_packages)
    pending = {}
    for t in trials:
        if t.state == "PENDING":
            pending[task.remote(t.spec, t.run_dir, t.index, monitor, cwd, hide_gpus, included)] = t
            t.state = "QUEUED"
    by_index = {t.index: t for t in trials}
    for ended, snapshot in monitored_rounds(pending, monitor, poll):
        for t, result, error in ended:
            if error is not None:
                t.state, t.error = "FAILED", error
                continue
            t.result = result
            t.state = "FINISHED" if t.result.get("finished") else "STOPPED"
            try:
                t.run_id = tracking.replay(t.result, t.spec, uri)
            except Exception as e:  # the run directory still holds the result
                t.error = f"trained, but logging to MLflow failed: {e}"
        for index, rec in snapshot.items():
            t = by_index[index]
            t.attempts, t.pid, t.epoch = rec["attempts"], rec.get("pid"), rec.get("epoch", 0)
            t.metric, t.progress = rec.get("metric"), rec.get("line")
            if t.state == "QUEUED":
                t.state = "RUNNING"
            if t.state == "RUNNING" and t.attempts > 1:
                t.state = "RETRYING"
        if on_update:
            on_update(trials)
    return trials

