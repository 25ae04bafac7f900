"""Data-parallel training on Ray Train: ``multigrain train SPEC --workers N`` (or ``trainer.workers``).

``Run.train`` (``runs.py``, ``run_training.py``) does everything a one-process training does in
this process - reads the data, builds and writes the vocabulary and ``config.json``, evaluates the
best weights at the end, writes ``metrics.json`` and does all MLflow logging - and hands the epochs
to the executor its caller passed as ``data_parallel`` (the run knows no Ray): here
``RayTrainCluster(...).launcher``, which runs them on a Ray Train ``TorchTrainer`` (Ray Train V2,
the default of Ray 2.60) of N workers:

- each worker builds the experiment and the model from the resolved spec as the one-process path
  does (vocabulary read from the run directory), joins the process group Ray Train set up (gloo on
  CPU, NCCL on GPU, one GPU per worker when the cluster has GPUs and ``trainer.cuda_device`` is not
  -1), and trains as a ``data_parallel.Replica``: the model wrapped in DDP by
  ``ray.train.torch.prepare_model``, a slice of every global batch of ``data_loader.batch_size``
  (see ``data_parallel`` for why that step equals the one-process step);
- rank 0 alone validates and writes ``best.pt`` and ``last.pt`` into the run directory, exactly the
  files of a one-process run (``last.pt`` adds the RNG states of every worker), so ``--resume``
  continues from it under Ray Train, and a run can be evaluated, served or extended like any other;
- every epoch all workers call ``ray.train.report`` with the epoch's numbers, and rank 0 puts the
  epoch record on a Ray queue; this process takes it from there and logs it to MLflow while
  ``fit()`` runs (workers never write the store), printing one line per epoch.

On a multi-node cluster (``--address``) the run directory and the data must be on a filesystem
every node sees at the same path (e.g. NFS), as Ray Train requires of its own storage.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from multigrain.platform.errors import LossNotFinite, MultigrainError
from multigrain.platform.ray.cluster import RemoteError, connect, error_text, shutdown

if TYPE_CHECKING:
    import torch


@dataclass
class RayTrainCluster:
    """Where the workers of a data-parallel training run: ``address`` None or ``"local"`` starts Ray in
    this process (listening on 127.0.0.1 only) and stops it afterwards; ``HOST:PORT`` or ``auto``
    joins a running cluster. An already initialised Ray is used as it is. Every worker imports the
    plugins the user included in this process, and ``include_packages`` (``plugins.travelling``)."""

    address: Optional[str] = None
    include_packages: tuple = ()

    @property
    def local(self) -> bool:
        return self.address in (None, "", "local")

    def launcher(self, run, workers: int) -> "Replicas":
        """The ``workers`` replicas of ``run``'s training (a ``data_parallel.Launcher``): the
        ``data_parallel`` that ``Run.train`` takes."""
        return Replicas(self, run, workers)


class Replicas:
    """The N workers of one run's training on Ray Train."""

    def __init__(self, cluster: RayTrainCluster, run, workers: int):
        self.cluster, self.run, self.workers = cluster, run, workers
        self._started = False
        self.use_gpu = run.trainer.cuda_device != -1 and self._gpus_available()

    def _gpus_available(self) -> bool:
        import ray

        if self.cluster.local and not ray.is_initialized():
            import torch

            return torch.cuda.is_available()
        self._connect()
        from multigrain.platform.ray.cluster import cluster_resources

        return cluster_resources().get("GPU", 0) >= 1

    def _connect(self) -> None:
        """Attach to Ray (``cluster.connect`` keeps ``multigrain train``'s SIGTERM handler: the run
        ends KILLED and resumable, as a one-process training does)."""
        self._started = connect(self.cluster.address, loopback=self.cluster.local) or self._started

    @property
    def device(self) -> torch.device:
        """The kind of device each worker trains on."""
        import torch

        return torch.device("cuda") if self.use_gpu else torch.device("cpu")

    @property
    def backend(self) -> str:
        return "nccl" if self.use_gpu else "gloo"

    def describe(self) -> str:
        """Where the run trained, for its results."""
        return f"Ray Train: {self.workers} workers ({self.backend}, {'one GPU' if self.use_gpu else 'CPU'} each)"

    def train(self, resume: bool, stop_after_epoch: Optional[int], live,
              epoch_lines: bool = True) -> tuple[dict, bool, float]:
        """Run the epochs on the workers; returns (the trainer's summary, finished, training seconds
        of earlier calls). ``live`` (``live_log.LiveLog``) gets every epoch as rank 0 reports it;
        ``epoch_lines``: print each epoch's summary line (``epoch_log``, as a one-process run does)."""
        import ray
        from ray.train import RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig, TorchTrainer
        from ray.util.queue import Queue

        from multigrain.platform.plugins import travelling

        self._connect()
        storage = tempfile.mkdtemp(prefix="multigrain-ray-train-")  # Ray Train's own files; ours are in run_dir
        queue = None
        try:
            queue = Queue(actor_options={"num_cpus": 0})
            config = {"spec": self.run.spec, "run_dir": str(Path(self.run.run_dir).resolve()), "resume": resume,
                      "stop_after_epoch": stop_after_epoch, "cwd": os.getcwd(), "queue": queue,
                      "plugins": travelling(self.cluster.include_packages)}
            trainer = TorchTrainer(_replica_loop, train_loop_config=config,
                                   scaling_config=ScalingConfig(num_workers=self.workers, use_gpu=self.use_gpu),
                                   torch_config=TorchConfig(backend=self.backend),
                                   run_config=RunConfig(name=f"multigrain-{self.run.spec_hash[:8]}",
                                                        storage_path=storage))
            with _ray_train_env(self.cluster.local):
                done = _fit_draining(trainer, queue, live, self.run.trainer if epoch_lines else None)
        finally:
            if queue is not None:
                ray.kill(queue.actor)
            shutil.rmtree(storage, ignore_errors=True)
            if self._started:
                shutdown()
                self._started = False
        if done is None:
            raise RuntimeError("Ray Train finished without a result from rank 0")
        return done


def _fit_draining(trainer, queue, live, lines=None) -> Optional[tuple[dict, bool, float]]:
    """``trainer.fit()`` in a thread (Ray Train then leaves this process's SIGINT handler alone:
    Ctrl-C and SIGTERM stop the command as they stop a one-process training) while this thread
    takes rank 0's reports off ``queue``: epochs to ``live`` (and with ``lines``, the run's
    ``TrainerConfig``, their summary lines to stderr), and the final summary."""
    from ray.util.queue import Empty

    outcome: dict = {}

    def fit() -> None:
        try:
            outcome["result"] = trainer.fit()
        except BaseException as e:  # raised below, in the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=fit, name="ray-train-fit", daemon=True)
    thread.start()
    done = None
    while True:
        try:
            item = queue.get(timeout=0.5)
        except Empty:
            if thread.is_alive():
                continue
            if queue.empty():
                break
            continue
        if item[0] == "epoch":
            _, epoch, record, history, progress = item
            live.epoch(epoch, record, history)
            if lines is not None:
                _print_epoch(lines, record, progress)
        else:
            done = item[1:]
    thread.join()
    if "error" in outcome:
        raise _worker_error(outcome["error"]) from None
    return done


@contextmanager
def _ray_train_env(local: bool):
    """Ray Train settings (read from this process's environment when ``fit()`` starts and passed on
    to its controller and workers) for the time of one ``fit()``: workers stay in the directory the
    runtime env gave them (the driver's, for a local Ray); on a local Ray the controller polls the
    workers every 0.5 s, not 2 s, and neither the node-preemption watcher nor the Prometheus metrics
    (no use on one machine, two more processes or threads to start) run. A value the user exported
    stays."""
    settings = {"RAY_CHDIR_TO_TRIAL_DIR": "0"}
    if local:
        settings.update({"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
                         "RAY_TRAIN_METRICS_ENABLED": "0"})
    added = [k for k in settings if k not in os.environ]
    os.environ.update({k: settings[k] for k in added})
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _print_epoch(config, record: dict, progress: dict) -> None:
    """The epoch's summary line, the one a one-process training prints (``epoch_log``), from rank
    0's best score so far and training seconds."""
    from multigrain.platform.epoch_log import epoch_line

    print(epoch_line(record, config.num_epochs, config.metric_name, progress["best"], progress["best_epoch"],
                     progress["seconds"]), file=sys.stderr, flush=True)


def _worker_error(error: BaseException) -> BaseException:
    """The error a worker raised, as this process reports it: a user-facing error (a damaged
    checkpoint, a missing metric) keeps its message; anything else is one line per failed rank."""
    def line(e: BaseException) -> str:  # a Ray error's cause, or the exception itself
        return error_text(e) if hasattr(e, "cause") else f"{type(e).__name__}: {e}"

    failures = getattr(error, "worker_failures", None)
    if not failures:
        return RuntimeError(f"Ray Train failed: {line(getattr(error, 'controller_failure', None) or error)}")
    for rank in sorted(failures):
        cause = getattr(failures[rank], "cause", failures[rank])
        if isinstance(cause, MultigrainError):
            return RemoteError(str(cause))
        if isinstance(cause, FloatingPointError):
            return LossNotFinite(str(cause))
    lines = [f"rank {rank}: {line(failures[rank])}" for rank in sorted(failures)]
    return RuntimeError("Ray Train workers failed:\n" + "\n".join(lines))


def _replica_loop(config: dict) -> None:
    """What each Ray Train worker runs: the run's epochs as one replica."""
    import ray.train
    import ray.train.torch

    from multigrain.platform import archive as files
    from multigrain.platform.config import build
    from multigrain.platform.data_parallel import Replica
    from multigrain.platform.experiment import Experiment, batches_for, eval_batches, read_all
    from multigrain.platform.training import Trainer, seed_everything

    os.environ["MULTIGRAIN_QUIET"] = "1"  # the driver prints rank 0's epochs
    if os.path.isdir(config["cwd"]):
        os.chdir(config["cwd"])  # relative data paths mean what they meant to the driver
    if config["plugins"]:  # the user's --include-package list (never a run directory's)
        from multigrain.platform.plugins import include_travelled

        include_travelled(config["plugins"])
    context = ray.train.get_context()
    device = ray.train.torch.get_device()
    replica = Replica(context.get_world_rank(), context.get_world_size(), device,
                      wrap=lambda model: ray.train.torch.prepare_model(model, move_to_device=device))
    if not replica.chief:  # rank 0 alone prints progress lines (every 30 s of a long stage or epoch)
        from multigrain.platform.progress import INTERVAL_ENV

        os.environ[INTERVAL_ENV] = "off"
    exp = build(Experiment, config["spec"], validated=True)  # validated by the driver
    seed_everything(exp.seed)
    run_dir = Path(config["run_dir"])
    train = read_all(exp.dataset_reader, exp.train_data_path)
    dev = read_all(exp.validation_dataset_reader, exp.validation_data_path) if replica.chief else []
    model = exp.model.construct(vocab=files.read_vocabulary(run_dir))
    resuming = config["resume"] or (run_dir / "last.pt").exists()  # a fresh run's directory had none
    if exp.initializer is not None and not resuming:  # every rank alike (DDP broadcasts rank 0's anyway)
        from multigrain.platform.initializer import initialize

        initialize(model, exp.initializer)
    if not replica.chief:  # a dropout stream of its own; the weights are rank 0's (DDP broadcasts them)
        seed_everything(exp.seed + 1_000_003 * replica.rank)
    queue = config["queue"]

    def on_epoch(epoch: int, record: dict) -> None:
        ray.train.report({k: v for k, v in record.items() if isinstance(v, (int, float))})
        if replica.chief:  # with what the driver's epoch line shows besides the record
            queue.put(("epoch", epoch, record, list(trainer.history),
                       {"best": trainer.best, "best_epoch": trainer.best_epoch, "seconds": trainer.seconds}))

    trainer = Trainer(exp.trainer, model, batches_for(model, train, exp.data_loader, exp.seed, True),
                      eval_batches(model, dev, exp.data_loader) if dev else None, run_dir, on_epoch, replica)
    if resuming:
        trainer.restore(run_dir / "last.pt")
    summary = trainer.train(stop_after_epoch=config["stop_after_epoch"])
    if replica.chief:
        queue.put(("done", summary, trainer.finished, trainer.seconds_before))
