"""Training one run (``runs.Run``) into its directory, once its plan is made (``run_plan``): the
orchestration between reading the data and writing ``metrics.json``.

``train_run`` owns, in this order,

- the data (train, dev, test and the spec's extra test sets, read with their readers) and the
  vocabulary (built on a fresh run, read from the directory on a resume);
- the refusals made before the run directory is made: a device the ``trainer`` section cannot
  train on (``devices.refusal``), sizes beyond the machine (``memory``), a validation metric the
  model does not report, ``data_loader.max_tokens`` below an instance, an evaluation reader whose
  examples the model cannot read (``check_model_reads``);
- the model (a fresh run's first weights from the spec's ``initializer``), and the run's files
  (marker, ``config.json``, vocabulary, plugin record; an extended run's new ``config.json`` only
  once its ``last.pt`` is loaded, ``Extension``);
- the epochs: in this process through a ``Trainer`` (one ``epoch_log`` line and one ``LiveLog``
  epoch each), or with ``trainer.workers`` above 1 on the replicas of the executor the caller
  handed over (``data_parallel``; the run knows no Ray: ``multigrain train`` passes Ray Train's);
- the result: the summary, the final evaluation of ``best.pt`` when the training finished
  (``final_evaluation``), seconds, device and git commit, written to ``metrics.json``.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from multigrain.platform import archive as files
from multigrain.platform import checkpoints, plugins, run_marker
from multigrain.platform.adversarial import matched_parameters
from multigrain.platform.data_parallel import DataParallel
from multigrain.platform.devices import describe_device, pick_device, refusal
from multigrain.platform.epoch_log import print_epoch_line
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.experiment import batches_for, build_vocabulary, eval_batches, read_all
from multigrain.platform.evaluation import check_model_reads
from multigrain.platform.final_evaluation import evaluate_best
from multigrain.platform.initializer import initialize
from multigrain.platform.test_sets import read_test_sets
from multigrain.platform.training import Trainer, TrainerConfig, optimization, seed_everything, write_json
from multigrain.platform.weights import torch_file, write_atomically


def check_data_parallel(config: TrainerConfig, data_parallel: Optional[DataParallel], executor: bool = True) -> None:
    """Refuses ``trainer.workers`` above 1 without an executor to train the replicas (unless
    ``executor`` is False: none is needed), and with adversarial training (checked before anything
    is written to the run directory)."""
    if config.workers > 1 and data_parallel is None and executor:
        raise ConfigurationError(f"trainer.workers is {config.workers}: a data-parallel training needs an "
                                 f"executor and none was given (`multigrain train` uses Ray Train; "
                                 f"Run.train(data_parallel=...)); set trainer.workers to 1 to train in this process")
    if config.workers > 1 and config.adversarial is not None:
        raise ConfigurationError(f"trainer.adversarial: adversarial training runs in one process, and "
                                 f"trainer.workers is {config.workers}; set trainer.workers to 1 or remove "
                                 f"trainer.adversarial")


class Extension:
    """A finished run extended to more epochs (``--resume`` with a longer spec) becomes the longer
    spec's (``config.json``, ``spec_hash``, ``plugins.json``) only once its checkpoint is loaded
    (``begin``); should the start fail or be interrupted before the training writes a checkpoint,
    ``undo`` puts the finished run's files back byte for byte: its ``metrics.json`` records the
    old spec hash, and ``multigrain log`` refused a run whose ``config.json`` hashed otherwise."""

    FILES = ("config.json", "spec_hash", plugins.PLUGINS_FILE)

    def __init__(self, run):
        self.run, self.run_dir = run, run.run_dir
        self.before = {name: (self.run_dir / name).read_bytes() if (self.run_dir / name).is_file() else None
                       for name in self.FILES}
        self.checkpoints = self._checkpoints()
        self.begun = False

    def _checkpoints(self) -> dict:
        """What identifies ``last.pt`` and ``best.pt`` now (written by renaming: a new one is a new inode)."""
        found = {}
        for name in ("last.pt", "best.pt"):
            try:
                info = os.stat(self.run_dir / name)
                found[name] = (info.st_ino, info.st_mtime_ns, info.st_size)
            except OSError:
                found[name] = None
        return found

    def begin(self) -> None:
        self.begun = True
        files.write_run_spec(self.run_dir, self.run.spec)  # the vocabulary stays the run's
        plugins.record(self.run_dir, self.run.spec)

    def undo(self) -> None:
        """The finished run's files back, unless the extension wrote a checkpoint (it is then an
        unfinished run of the longer spec, continued by ``--resume``)."""
        if not self.begun or self._checkpoints() != self.checkpoints:
            return
        for name, data in self.before.items():
            path = self.run_dir / name
            if data is None:
                path.unlink(missing_ok=True)
            elif not path.is_file() or path.read_bytes() != data:
                write_atomically(path, lambda f, data=data: f.write(data))


@dataclass
class Prepared:
    """What a run trains on, read and built, every check before its first file passed (``prepare``)."""
    train: list
    dev: list
    test: list
    test_sets: dict
    vocab: object
    model: object
    train_batches: object
    optimizer: object  # built once, unused by the training (its Trainer builds its own): what it would step


def prepare(run, resume: bool, resource_dir: Optional[Path] = None) -> Prepared:
    """The data, the vocabulary (a resumed run's own) and the model of ``run``, and every refusal made
    before the run directory is written: the device (one process), memory, the validation metric,
    ``max_tokens``, the optimizer's parameter groups, the evaluation readers. Seeds first, as the
    training does. A fresh model's fitted resources go to ``resource_dir`` (default: the run's)."""
    exp, run_dir = run.experiment, run.run_dir
    seed_everything(exp.seed)
    train = read_all(exp.dataset_reader, exp.train_data_path)
    dev = read_all(exp.validation_dataset_reader, exp.validation_data_path)
    test = read_all(exp.test_dataset_reader, exp.test_data_path) if exp.evaluate_on_test else []
    test_sets = read_test_sets(exp)
    if not train:
        raise ConfigurationError(f"train_data_path: {exp.train_data_path} has no examples")
    if resume:
        vocab = files.read_vocabulary(run_dir)
    else:
        vocab = build_vocabulary(exp, exp.model_class(), train, [dev, test, *test_sets.values()])
    if exp.trainer.workers == 1 and (why_not := refusal(exp.trainer, pick_device(exp.trainer.cuda_device))):
        raise ConfigurationError(why_not)  # before a model's resource is fitted into the run directory
    from multigrain.platform.memory import check_training_memory  # sizes beyond the machine: refused unallocated

    resource_dir = run_dir if resource_dir is None else resource_dir
    check_training_memory(exp.model, vocab, resource_dir, exp.trainer.cuda_device, source=run.source)
    model = exp.model.construct(vocab=vocab, offered={"resources": files.run_resources(run_dir) if resume
                                                      else run_marker.fresh_resources(resource_dir, train)})
    if exp.initializer is not None and not resume:  # a misfit stops the run before its files are written
        copied = initialize(model, exp.initializer)
        print(f"initializer: {copied} tensors from {exp.initializer.weights}", file=sys.stderr, flush=True)
    if exp.trainer.adversarial is not None:
        matched_parameters(model, exp.trainer.adversarial)  # the pattern names a matrix of this model
    reported = set(model.get_metrics(reset=True)) | {"loss"}
    if dev and exp.trainer.metric_name not in reported:
        raise ConfigurationError(f"trainer.validation_metric: the model reports no metric "
                                 f"{exp.trainer.metric_name!r}; it reports {', '.join(sorted(reported))}")
    train_batches = batches_for(model, train, exp.data_loader, exp.seed, True)  # checks max_tokens
    optimizer, _ = optimization(exp.trainer, model, train_batches.num_batches(0))  # a bad regex stops here
    check_model_reads(model, {"validation_dataset_reader": dev, "test_dataset_reader": test,
                              **{f"test_sets.{name}": s for name, s in test_sets.items()}},
                      train=train, suspects=plugins.suspects(run.spec))
    return Prepared(train, dev, test, test_sets, vocab, model, train_batches, optimizer)


def train_run(run, resume: bool, extended: bool, stop_after_epoch: Optional[int], live, commit: str,
              epoch_lines: bool, data_parallel: Optional[DataParallel]) -> dict:
    """Train (or continue) ``run`` (a ``runs.Run``) into its directory as planned (``resume``: from
    ``last.pt``; ``extended``: the run is now the longer spec's); returns the summary also written
    to ``metrics.json``. ``live``: the ``live_log.LiveLog`` of this call."""
    exp, run_dir = run.experiment, run.run_dir
    check_data_parallel(exp.trainer, data_parallel)
    checkpoint_seconds = checkpoints.checkpoint_interval()  # a bad MULTIGRAIN_CHECKPOINT_SECONDS: before any file
    started = time.time()
    ready = prepare(run, resume)
    train, dev, test, test_sets = ready.train, ready.dev, ready.test, ready.test_sets
    vocab, model, train_batches = ready.vocab, ready.model, ready.train_batches

    replicas = data_parallel(run, exp.trainer.workers) if exp.trainer.workers > 1 else None
    device = pick_device(exp.trainer.cuda_device)  # this process's: the final evaluation's
    why_not = refusal(exp.trainer, replicas.device if replicas else device)  # precision, compile
    if why_not:
        raise ConfigurationError(why_not)

    run_marker.mark(run_dir)  # makes it, the marker first (unless fitting a resource marked it)
    if not resume:
        files.write_run_files(run_dir, run.spec, vocab)
    if not resume or (not extended and not (run_dir / plugins.PLUGINS_FILE).exists()):
        plugins.record(run_dir, run.spec)
    extension = Extension(run) if extended else None
    validation = eval_batches(model, dev, exp.data_loader) if dev else None
    try:
        if replicas:
            if extension:  # the replicas load last.pt; a file that is no checkpoint is refused here first
                torch_file(run_dir / "last.pt")
                extension.begin()
            summary, finished, seconds_before = replicas.train(resume, stop_after_epoch, live, epoch_lines)
        else:
            def on_epoch(epoch: int, record: dict) -> None:
                if epoch_lines:
                    print_epoch_line(trainer, record)
                live.epoch(epoch, record, trainer.history)

            trainer = Trainer(exp.trainer, model, train_batches, validation, run_dir, on_epoch=on_epoch,
                              checkpoint_seconds=checkpoint_seconds)
            if resume:
                trainer.restore(run_dir / "last.pt")
            if extension:
                extension.begin()
            summary = trainer.train(stop_after_epoch=stop_after_epoch)
            finished, seconds_before, device = trainer.finished, trainer.seconds_before, trainer.device
    except BaseException:
        if extension:
            extension.undo()
        raise

    result = {"spec_hash": run.spec_hash, "run_dir": str(run_dir), "source": run.source, **run.identity,
              "leaderboard_metric": model.leaderboard_metric, "finished": finished, **summary,
              **({"ext_vars": run.ext_vars} if run.ext_vars else {})}
    if finished:
        result.update(evaluate_best(run, model, vocab, device, validation, test, test_sets))
    result["seconds"] = time.time() - started + seconds_before
    result["device"] = replicas.describe() if replicas else describe_device(device)
    result["git_commit"] = commit  # `multigrain log` tags the MLflow run with it
    write_json(run_dir / "metrics.json", result)
    return result
