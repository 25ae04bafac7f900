"""One training run from a resolved spec: read data, build vocabulary and model, train,
evaluate, write the run directory. Used by the CLI and by Ray workers alike."""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Optional

from multigrain.platform.batching import BatchIterator, DataLoaderConfig
from multigrain.platform.config import Lazy, build, validate
from multigrain.platform.specs import spec_hash
from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.kinds import Model, Reader
from multigrain.platform.training import TrainerConfig
from multigrain.platform.vocab import VocabularyConfig, is_label_namespace


class Experiment:
    """The top level of a training spec."""

    def __init__(self, dataset_reader: Reader, train_data_path: str, model: Lazy[Model], trainer: TrainerConfig,
                 validation_data_path: Optional[str] = None, test_data_path: Optional[str] = None,
                 validation_dataset_reader: Optional[Reader] = None, test_dataset_reader: Optional[Reader] = None,
                 vocabulary: Optional[VocabularyConfig] = None, data_loader: Optional[DataLoaderConfig] = None,
                 task: Optional[str] = None, dataset: Optional[str] = None, seed: int = 13,
                 evaluate_on_test: bool = True, description: str = ""):
        self.dataset_reader = dataset_reader
        self.validation_dataset_reader = validation_dataset_reader or dataset_reader
        self.test_dataset_reader = test_dataset_reader or self.validation_dataset_reader
        self.train_data_path = train_data_path
        self.validation_data_path = validation_data_path
        self.test_data_path = test_data_path
        self.model = model
        self.trainer = trainer
        self.vocabulary = vocabulary or VocabularyConfig()
        self.data_loader = data_loader or DataLoaderConfig()
        self.task = task
        self.dataset = dataset
        self.seed = seed
        self.evaluate_on_test = evaluate_on_test
        self.description = description


def validate_spec(spec: dict, source: Optional[str] = None) -> None:
    """Raise one SpecError listing every problem (paths too) before anything is built."""
    problems = validate(spec, Experiment)
    for key in ("train_data_path", "validation_data_path", "test_data_path"):
        value = spec.get(key)
        if isinstance(value, str) and not Path(value).exists():
            problems.append(f"{key}: file not found: {value} (paths are relative to {Path.cwd()})")
    if problems:
        raise SpecError(problems, source)


def identity(spec: dict) -> dict:
    """Task, dataset, model and encoder names of a spec, for tracking."""
    model = spec.get("model", {}) or {}
    encoder = model.get("encoder", {}) or {}
    return {
        "task": spec.get("task") or "",
        "dataset": spec.get("dataset") or Path(str(spec.get("train_data_path", "data"))).parent.name,
        "model": model.get("type", ""),
        "encoder": encoder.get("type", "") if isinstance(encoder, dict) else str(encoder),
    }


def read_all(reader: Reader, path: Optional[str]) -> list:
    return list(reader.read(path)) if path else []


def build_vocabulary(exp: Experiment, model_cls: type, train: list, others: list[list]):
    """Tokens from the training data (plus, with ``vocabulary.pretrained_files``, tokens of any
    split that have a pretrained vector); labels from every split (an unseen test label is not a
    crash)."""
    def count_labels_only(inst, counters):
        scratch: dict[str, Counter] = {}
        model_cls.count_vocab_items(inst, scratch)
        for ns, c in scratch.items():
            if is_label_namespace(ns):
                counters.setdefault(ns, Counter()).update(c)

    counters: dict[str, Counter] = {}
    for inst in train:
        model_cls.count_vocab_items(inst, counters)
    for split in others:
        for inst in split:
            count_labels_only(inst, counters)
    extra = None
    if exp.vocabulary.pretrained_files:  # tokens of every split that have a pretrained vector
        every: dict[str, Counter] = {}
        for split in [train, *others]:
            for inst in split:
                model_cls.count_vocab_items(inst, every)
        extra = exp.vocabulary.pretrained_tokens(every)
    from multigrain.platform.vocab import Vocabulary

    return Vocabulary.from_counters(counters, exp.vocabulary.min_count, exp.vocabulary.max_size, extra)


def batches_for(model: Model, instances: list, cfg: DataLoaderConfig, seed: int, train: bool) -> BatchIterator:
    return BatchIterator(instances, model.tensorize, model.instance_length,
                         batch_size=cfg.batch_size if train else cfg.eval_batch_size,
                         shuffle=train and cfg.shuffle, seed=seed, noise=cfg.bucket_noise,
                         max_tokens=cfg.max_tokens if train else None)


def model_class(spec: dict) -> type:
    return Model.by_name(spec["model"]["type"])


def extension_refused(saved: dict, spec: dict) -> Optional[str]:
    """Why the run of ``saved`` cannot be continued as ``spec`` (None when it can): only a larger
    ``trainer.num_epochs`` may differ, and the learning-rate schedule must not depend on it (then the
    continued run is the run the longer spec would have made)."""
    from multigrain.platform.kinds import Scheduler

    old_epochs, new_epochs = saved.get("trainer", {}).get("num_epochs"), spec.get("trainer", {}).get("num_epochs")
    same_otherwise = json.loads(json.dumps(saved))
    same_otherwise.setdefault("trainer", {})["num_epochs"] = new_epochs
    if spec_hash(same_otherwise) != spec_hash(spec):
        return ""
    if not isinstance(old_epochs, int) or not isinstance(new_epochs, int) or new_epochs <= old_epochs:
        return f" (only trainer.num_epochs differs: {old_epochs} in the run, {new_epochs} given; a run can be extended, not cut)"
    schedule = (spec["trainer"].get("scheduler") or {}).get("type")
    if schedule is not None and getattr(Scheduler.by_name(schedule), "uses_num_training_steps", True):
        return (f" (only trainer.num_epochs differs, but the {schedule!r} schedule depends on it, so "
                f"{new_epochs} epochs from this run would not be a {new_epochs}-epoch run)")
    return None


def shorter_run(spec: dict, parent: Path) -> Optional[Path]:
    """The run directory under ``parent`` that ``spec`` can extend (same spec with fewer epochs,
    see ``extension_refused``, and a ``last.pt``) with the most epochs, or None."""
    from multigrain.platform import archive

    parent = Path(parent)
    if not parent.is_dir():
        return None
    runs = (p for p in parent.iterdir()
            if not p.name.endswith(".copying") and (p / "config.json").is_file() and (p / "last.pt").is_file())
    best, best_epochs = None, -1
    for run in sorted(runs):
        saved = archive.read_spec(run)
        epochs = saved.get("trainer", {}).get("num_epochs")
        if extension_refused(saved, spec) is None and epochs > best_epochs:
            best, best_epochs = run, epochs
    return best


def train_experiment(spec: dict, run_dir: str | Path, resume: bool = False, stop_after_epoch: Optional[int] = None,
                     on_epoch: Optional[Callable[[int, dict], None]] = None, source: Optional[str] = None) -> dict:
    """Train and evaluate; returns the run summary also written to ``metrics.json``."""
    from multigrain.platform import archive
    from multigrain.platform.tracking import git_commit
    from multigrain.platform.training import Trainer, describe_device, evaluate, seed_everything, write_json

    run_dir = Path(run_dir)
    validate_spec(spec, source)
    digest = spec_hash(spec)
    commit = git_commit()  # at the start: the checkout may move on during a long training
    if resume:
        saved = archive.read_spec(run_dir)
        extended = spec_hash(saved) != digest
        if extended:
            why_not = extension_refused(saved, spec)
            if why_not is not None:
                raise ConfigurationError(f"{run_dir}: --resume with a different spec (hash {spec_hash(saved)[:12]} in "
                                         f"the run, {digest[:12]} given); resume with the run's own spec{why_not}")
        if not (run_dir / "last.pt").exists():
            raise ConfigurationError(f"{run_dir}: nothing to resume (no last.pt)")
    elif run_dir.exists() and any(run_dir.iterdir()):
        raise ConfigurationError(f"{run_dir}: the run directory exists and is not empty; "
                                 f"pass --resume to continue it or choose another -s")

    exp: Experiment = build(Experiment, spec)
    seed_everything(exp.seed)
    started = time.time()
    train = read_all(exp.dataset_reader, exp.train_data_path)
    dev = read_all(exp.validation_dataset_reader, exp.validation_data_path)
    test = read_all(exp.test_dataset_reader, exp.test_data_path) if exp.evaluate_on_test else []
    if not train:
        raise ConfigurationError(f"train_data_path: {exp.train_data_path} has no examples")
    vocab = build_vocabulary(exp, model_class(spec), train, [dev, test])
    if resume:
        vocab = archive.read_vocabulary(run_dir)
    model = exp.model.construct(vocab=vocab)

    run_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        archive.write_run_files(run_dir, spec, vocab)
    elif extended:  # the run is now the longer spec's; its vocabulary stays
        archive.write_run_spec(run_dir, spec)
    trainer = Trainer(exp.trainer, model, batches_for(model, train, exp.data_loader, exp.seed, True),
                      batches_for(model, dev, exp.data_loader, exp.seed, False) if dev else None,
                      run_dir, on_epoch=on_epoch)
    if resume:
        trainer.restore(run_dir / "last.pt")
    summary = trainer.train(stop_after_epoch=stop_after_epoch)
    finished = trainer.epoch >= exp.trainer.num_epochs or (
        exp.trainer.patience is not None and trainer.bad_epochs >= exp.trainer.patience)

    result = {"spec_hash": digest, "run_dir": str(run_dir), **identity(spec),
              "leaderboard_metric": model.leaderboard_metric, "finished": finished, **summary}
    if finished:
        archive.load_weights(model, run_dir / "best.pt", trainer.device)
        if dev:
            result["validation"] = evaluate(model, trainer.validation, trainer.device, "dev (best)")
        if test:
            result["test"] = evaluate(model, batches_for(model, test, exp.data_loader, exp.seed, False),
                                      trainer.device, "test (best)")
        report = getattr(model, "report", None)
        if callable(report) and test:
            result["test_report"] = report()
    result["seconds"] = time.time() - started + trainer.seconds_before
    result["device"] = describe_device(trainer.device)
    result["git_commit"] = commit  # `multigrain log` tags the MLflow run with it
    write_json(run_dir / "metrics.json", result)
    return result
