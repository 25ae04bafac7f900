"""The training loop: schedules, clipping, validation with patience, weight averaging,
checkpoints, resume (reading and checking checkpoints: ``checkpoints``); the ``trainer`` section
of a spec (``TrainerConfig``). The device it trains on: ``devices``; validation: ``evaluation``.

``last.pt`` holds everything needed to continue bit-identically: model, optimizer and
scheduler state, the averaged weights, the epoch, the early-stopping state, and the torch /
Python / NumPy RNG states. Batch order depends only on (seed, epoch), so no sampler state is
needed beyond that: a ``last.pt`` written inside an epoch (``checkpoints.checkpoint_interval``)
adds the steps done, and a resume skips that many of the epoch's batches without building them.
"""
from __future__ import annotations

import json
import math
import random
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Callable, Literal, Optional

import numpy as np
import torch

from multigrain.platform import checkpoints, compiling, interruption
from multigrain.platform.adversarial import AdversarialConfig, FastGradient
from multigrain.platform.averaging import MovingAverage
from multigrain.platform.batching import BatchIterator
from multigrain.platform.checkpoints import atomic_save, load_checkpoint, rng_state, set_rng_state  # noqa: F401
from multigrain.platform.config import Lazy, build
from multigrain.platform.data_parallel import Replica
from multigrain.platform.devices import move_to, pick_device
from multigrain.platform.errors import LossNotFinite
from multigrain.platform.evaluation import evaluate
from multigrain.platform.hints import Matches, Range
from multigrain.platform.kinds import Model, Optimizer, Scheduler
from multigrain.platform.precision import Precision
from multigrain.platform.prefetch import pin, prefetched
from multigrain.platform.progress import interval as progress_interval
from multigrain.platform.progress import progress
from multigrain.platform.weights import write_atomically


class TrainerConfig:
    """The ``trainer`` section of a spec."""

    def __init__(self, optimizer: Lazy[Optimizer], num_epochs: Annotated[int, Range(1)] = 10,
                 scheduler: Optional[Lazy[Scheduler]] = None, grad_clipping: Optional[Annotated[float, Range(0)]] = None,
                 patience: Optional[Annotated[int, Range(1)]] = None,
                 validation_metric: Annotated[str, Matches(r"[+-][\w.-]+", "+NAME or -NAME (larger or smaller is better)")] = "+f1",
                 cuda_device: Optional[Annotated[int, Range(-1)]] = None,
                 moving_average: Optional[Annotated[float, Range(0.0, 1.0, low_open=True, high_open=True)]] = None,
                 workers: Annotated[int, Range(1)] = 1,
                 mixed_precision: Optional[Literal["bf16", "fp16", "auto"]] = None, compile: bool = False,
                 adversarial: Optional[AdversarialConfig] = None):
        """``moving_average``: the decay of an exponential moving average of the weights (AllenNLP's
        ``trainer.moving_average``); validation, ``best.pt`` and so the test score use the
        averaged weights, training steps the raw ones.

        ``workers``: data-parallel replicas (``multigrain train --workers N``); above 1 the training
        runs on Ray Train (``platform/ray/train.py``), each replica taking a slice of every global
        batch of ``data_loader.batch_size``. ``mixed_precision``: ``"bf16"``/``"fp16"`` autocast on
        CUDA, ``"auto"`` bf16 where the GPU has it and float32 elsewhere (``platform/precision.py``).
        ``compile``: the training forward runs through ``torch.compile`` (refused before the run
        directory is made where it cannot run: ``platform/compiling.py``). These are absent from a spec
        that does not set them, so they do not change its hash. ``adversarial``: a second forward and
        backward pass each step with the embeddings moved along their gradient (the fast gradient
        method, ``platform/adversarial.py``), in one process only."""
        if not validation_metric or validation_metric[0] not in "+-":
            raise ValueError(f"validation_metric must start with + or -, got {validation_metric!r}")
        if moving_average is not None and not 0.0 < moving_average < 1.0:
            raise ValueError(f"moving_average is a decay between 0 and 1 (exclusive), got {moving_average!r}")
        self.optimizer = optimizer
        self.num_epochs = num_epochs
        self.scheduler = scheduler
        self.grad_clipping = grad_clipping
        self.patience = patience
        self.validation_metric = validation_metric
        self.cuda_device = cuda_device
        self.moving_average = moving_average
        self.workers = workers
        self.mixed_precision = mixed_precision
        self.compile = compile
        self.adversarial = adversarial

    @property
    def metric_name(self) -> str:
        """``validation_metric`` without its direction: ``+f1`` -> ``f1``."""
        return self.validation_metric[1:]

    @property
    def metric_sign(self) -> float:
        """+1.0 when a larger validation metric is better, -1.0 when a smaller one is."""
        return 1.0 if self.validation_metric[0] == "+" else -1.0

    def finished(self, epochs_completed: int, bad_epochs: int) -> bool:
        """The one rule for a finished training: every epoch run, or stopped by patience."""
        return epochs_completed >= self.num_epochs or (self.patience is not None and bad_epochs >= self.patience)

    @property
    def schedule_depends_on_epochs(self) -> bool:
        """Whether the learning rate at a step depends on ``num_epochs`` (then a run cannot be
        extended to more epochs as if it had been planned that long)."""
        if self.scheduler is None:
            return False
        name = self.scheduler.type_name
        return name is None or getattr(Scheduler.by_name(name), "uses_num_training_steps", True)


def trainer_settings(spec: dict) -> TrainerConfig:
    """The typed ``trainer`` section of a resolved spec (cheap: builds no model, reads no data);
    for code that plans runs (sweeps, jobs, ``run_plan``) without making them."""
    return build(TrainerConfig, spec.get("trainer"), "trainer")


#: the longest stretch of training steps without reading the loss (seconds; progress lines may
#: be rarer, ``progress.interval``)
SYNC_SECONDS = 2.0


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def optimization(config: TrainerConfig, model: torch.nn.Module, steps_per_epoch: int) -> tuple:
    """The optimizer over ``model``'s trainable parameters (named, for ``parameter_groups``) and the
    schedule (None without one) that ``config`` names, for ``config.num_epochs`` of ``steps_per_epoch``."""
    params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    optimizer = config.optimizer.construct(model_parameters=params)
    if config.scheduler is None:
        return optimizer, None
    return optimizer, config.scheduler.construct(optimizer=optimizer, offered={"steps_per_epoch": steps_per_epoch},
                                                 num_training_steps=steps_per_epoch * config.num_epochs)


class Trainer:
    """Trains ``model`` in this process, or as one ``replica`` of a data-parallel training (see
    ``data_parallel``): then every replica steps on its slice of each batch, the chief (rank 0)
    alone validates and writes ``best.pt``/``last.pt``, and ``on_epoch`` is called on every replica
    with the chief's record."""

    def __init__(self, config: TrainerConfig, model: Model, train: BatchIterator, validation: Optional[BatchIterator],
                 run_dir: Path, on_epoch: Optional[Callable[[int, dict], None]] = None,
                 replica: Optional[Replica] = None, prefetch: int = 2, checkpoint_seconds: float = math.inf):
        """``checkpoint_seconds``: write ``last.pt`` inside an epoch at most this often (one process
        only; a replica writes it at the ends of epochs)."""
        self.config = config
        self.model = model
        self.train_data = train
        self.validation = validation
        self.run_dir = Path(run_dir)
        self.on_epoch = on_epoch
        self.replica = replica
        self.chief = replica is None or replica.chief
        self.device = replica.device if replica else pick_device(config.cuda_device)
        self.precision = Precision(config.mixed_precision, self.device)
        self.model.to(self.device)
        self.stepped = replica.wrap(model) if replica else model  # the module whose forward/backward train
        if config.compile:
            self.stepped = compiling.compiled(self.stepped, self.device)
        self.prefetch = prefetch  # batches built ahead on a thread (0: in this one); the same batches
        self.sync_seconds = min(progress_interval(), SYNC_SECONDS)
        self.optimizer, self.scheduler = optimization(config, model, train.num_batches(0))
        self.average = MovingAverage(model, config.moving_average) if config.moving_average else None
        self.adversary = FastGradient(model, config.adversarial) if config.adversarial else None
        self.sign = config.metric_sign
        self.metric_name = config.metric_name
        self.epoch = 0  # epochs completed
        self.best: Optional[float] = None
        self.best_epoch: Optional[int] = None
        self.bad_epochs = 0
        self.history: list[dict] = []
        self.seconds_before = 0.0  # training seconds of the earlier calls of a resumed run
        self._started = time.time()
        self.checkpoint_seconds = checkpoint_seconds if replica is None else math.inf
        self.resume_step, self.resume_loss = 0, 0.0  # a last.pt written inside an epoch: where it stopped

    @property
    def finished(self) -> bool:
        return self.config.finished(self.epoch, self.bad_epochs)

    @property
    def seconds(self) -> float:
        """Training seconds of the whole run so far (earlier calls of a resumed run included)."""
        return self.seconds_before + time.time() - self._started

    # checkpoints ----------------------------------------------------------
    def _state(self, replica_rng: Optional[list] = None, step: int = 0, loss_sum: float = 0.0) -> dict:
        """``replica_rng``: every replica's RNG states in rank order (``rng`` is the chief's);
        ``step``: the steps done in the epoch under way (0: at its end), ``loss_sum`` their loss."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler else None,
            "moving_average": self.average.state_dict() if self.average else None,
            "epoch": self.epoch, "best": self.best, "best_epoch": self.best_epoch,
            "bad_epochs": self.bad_epochs, "history": self.history, "rng": rng_state(),
            "seconds": self.seconds,
            "grad_scaler": self.precision.state_dict(), "replica_rng": replica_rng,
            **({"step_in_epoch": step, "epoch_loss": loss_sum} if step else {}),
        }

    def restore(self, path: Path) -> None:
        """Continue from the checkpoint ``path`` (``last.pt``), checked before anything is applied
        (``checkpoints.restore``)."""
        checkpoints.restore(self, path)

    # loop -----------------------------------------------------------------
    def train(self, stop_after_epoch: Optional[int] = None) -> dict:
        self._started = time.time()
        while not self.finished:
            epoch = self.epoch
            train_metrics = self._train_epoch(epoch)
            record = {"epoch": epoch + 1, **{f"train_{k}": v for k, v in train_metrics.items()}}
            averaged = self.average.swapped_in() if self.average and self.chief else nullcontext()
            with averaged:  # validation and best.pt see the averaged weights
                if not self.chief:  # the chief's outcome arrives below
                    score = None
                elif self.validation is not None:
                    val = evaluate(self.model, self.validation, self.device, desc=f"validate {epoch + 1}")
                    record.update({f"validation_{k}": v for k, v in val.items()})
                    score = val.get(self.metric_name)
                    if score is None:
                        raise KeyError(f"trainer.validation_metric: the model reports no metric "
                                       f"{self.metric_name!r}; it reports {', '.join(sorted(val))}")
                else:  # no dev set: the best epoch is the one with the lowest training loss
                    score = -train_metrics.get("loss", 0.0) * self.sign
                self.epoch = epoch + 1
                if self.chief and (self.best is None or self.sign * score > self.sign * self.best):
                    self.best, self.best_epoch, self.bad_epochs = score, self.epoch, 0
                    atomic_save(self.model.state_dict(), self.run_dir / "best.pt")
                elif self.chief:
                    self.bad_epochs += 1
            record["lr"] = self.optimizer.param_groups[0]["lr"]
            replica_rng = None
            if self.replica:
                record, self.best, self.best_epoch, self.bad_epochs = self.replica.broadcast(
                    (record, self.best, self.best_epoch, self.bad_epochs))
                replica_rng = self.replica.gather(rng_state())
            self.history.append(record)
            if self.chief:
                atomic_save(self._state(replica_rng), self.run_dir / "last.pt")
            if self.on_epoch:
                self.on_epoch(self.epoch, record)
            if stop_after_epoch is not None and self.epoch >= stop_after_epoch:
                break
        return {"best_epoch": self.best_epoch, f"best_validation_{self.metric_name}": self.best,
                "epochs_completed": self.epoch, "training_seconds": self.seconds,
                "history": self.history}

    def _batches(self, epoch: int, start: int = 0):
        """(batch, this process's share of it): whole batches from the ``start``-th, or a replica's slices."""
        if self.replica is None:
            return ((batch, 1.0) for _, batch in self.train_data.epoch(epoch, start))
        return self.train_data.epoch_parts(epoch, self.replica.part)

    def _train_epoch(self, epoch: int) -> dict[str, float]:
        """One epoch of steps. Nothing here waits for the device between two sync points: the loss
        is summed on the device (in float64, as the Python float sum it replaces), and the sum is
        read, shown and checked to be finite every ``sync_seconds`` and at the end of the epoch, so
        that a GPU stays a queue of steps ahead of the host. The batches are built ahead on a
        thread (``prefetch``), pinned for an asynchronous copy on CUDA."""
        self.stepped.train()
        self.model.get_metrics(reset=True)
        start, loss_before = self.resume_step, self.resume_loss  # 0, 0.0 unless resumed inside this epoch
        self.resume_step, self.resume_loss = 0, 0.0
        total = torch.full((), loss_before, dtype=torch.float32 if self.device.type == "mps" else torch.float64,
                           device=self.device)
        count, checked = start, start
        pin_batch = (lambda item: (pin(item[0]), item[1])) if self.device.type == "cuda" else None
        next_sync = time.monotonic() + self.sync_seconds
        next_checkpoint = time.monotonic() + self.checkpoint_seconds
        num_batches = self.train_data.num_batches(epoch)
        with prefetched(self._batches(epoch, start), self.prefetch, pin_batch) as batches:
            desc = f"epoch {epoch + 1}/{self.config.num_epochs}" + (f" from batch {start + 1:,}" if start else "")
            bar = progress(batches, total=num_batches - start, desc=desc)
            for batch, share in bar:
                interruption.check()  # a Ctrl-C or SIGTERM that Python dropped (platform/interruption.py)
                batch = move_to(batch, self.device)
                with self.precision.autocast():
                    out = self.stepped(**batch)
                self.optimizer.zero_grad(set_to_none=True)
                if self.replica is None:
                    self.precision.backward(out["loss"])
                    total += out["loss"].detach()
                else:  # DDP averages the replicas' gradients: each contributes W * w_r * grad L_r
                    scaled, part = self.replica.weighted_loss(share, out)
                    self.precision.backward(scaled)
                    total += part
                if self.adversary:  # the gradient at the perturbed embeddings adds to the step's
                    with self.adversary.perturbed():  # restored after the backward: it may read them
                        with self.precision.autocast():
                            attacked = self.stepped(**batch)
                        self.precision.backward(attacked["loss"])  # one process: run_training refuses workers
                if self.config.grad_clipping:
                    self.precision.unscale(self.optimizer)
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clipping)
                self.precision.step(self.optimizer)
                if self.average:
                    self.average.update()
                if self.scheduler:
                    self.scheduler.step()
                count += 1
                now = time.monotonic()
                checkpoint = now >= next_checkpoint and count < num_batches
                if checkpoint or now >= next_sync:  # one read of the loss serves both
                    loss_sum = self._checked_loss(total, epoch, checked, count, bar)
                    checked, next_sync = count, time.monotonic() + self.sync_seconds
                    if checkpoint:
                        atomic_save(self._state(step=count, loss_sum=loss_sum), self.run_dir / "last.pt")
                        next_checkpoint = time.monotonic() + self.checkpoint_seconds
        loss = self._checked_loss(total, epoch, checked, count, None)
        if self.replica is not None:  # the batches' losses: sum_r w_r L_r
            loss = self.replica.sum([loss])[0]
        # The models measure only in evaluation (decoding every training batch would cost more
        # than the step); their zero counts are no training score, so only the loss is reported.
        self.model.get_metrics(reset=True)
        return {"loss": loss / max(1, count)}

    @staticmethod
    def _checked_loss(total: torch.Tensor, epoch: int, checked: int, count: int, bar) -> float:
        """The epoch's loss sum so far, read from the device (the one sync point of a stretch of
        steps); non-finite: ``LossNotFinite`` naming the epoch and the steps since the last check."""
        value = float(total)
        if not math.isfinite(value):
            steps = f"step {count}" if count == checked + 1 else f"steps {checked + 1}-{count}"
            raise LossNotFinite(f"epoch {epoch + 1}, {steps}: the loss became {value}; a lower "
                                f"trainer.optimizer.lr or trainer.grad_clipping may help, unless a component "
                                f"computes it")
        if bar is not None and hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{value / max(1, count):.4f}", refresh=False)
        return value


def write_json(path: Path, data) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=float).encode("utf-8")
    write_atomically(path, lambda f: f.write(text))


def with_workers(spec: dict, workers: int) -> tuple[dict, Optional[str]]:
    """The spec with ``trainer.workers`` set by ``--workers`` (an override like ``-o``, recorded in
    the resolved spec and so in its hash), and a note when it replaces another value of the spec.
    ``--workers 1`` on a spec without the key leaves it absent (absent means 1: the hash of a
    one-process run does not depend on the flag)."""
    trainer = spec.get("trainer")
    if not isinstance(trainer, dict):
        return spec, None  # validation reports the missing section
    before = trainer.get("workers")
    if before == workers or (before is None and workers == 1):
        return spec, None
    spec = {**spec, "trainer": {**trainer, "workers": workers}}
    note = None if before is None else f"--workers {workers} replaces trainer.workers {json.dumps(before)} of the spec"
    return spec, note
