"""The top level of a training spec (``Experiment``) and what is derived from it alone:
validation, the run's task/dataset/model/encoder names, its data, vocabulary and batches.
Training it into a run directory is ``runs.Run``'s concern."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional

from multigrain.platform.batching import BatchIterator, DataLoaderConfig
from multigrain.platform.config import Lazy, validate
from multigrain.platform.errors import ConfigurationError, Problem, SpecError
from multigrain.platform.initializer import InitializerConfig
from multigrain.platform.initializer import spec_problems as initializer_problems
from multigrain.platform.kinds import Model, Reader
from multigrain.platform.test_sets import EvaluationSet, spec_problems
from multigrain.platform.specs import encoder_name
from multigrain.platform.store_names import segment_problem
from multigrain.platform.training import TrainerConfig
from multigrain.platform.vocab import VocabularyConfig, is_label_namespace
from multigrain.platform.vocab import spec_problems as vocabulary_problems
from multigrain.platform.paths import is_there, not_found


#: the data splits a spec names a reader for (``evaluate --reader``)
READER_SPLITS = ("train", "validation", "test")


class Experiment:
    """The top level of a training spec."""

    def __init__(self, dataset_reader: Reader, train_data_path: str, model: Lazy[Model], trainer: TrainerConfig,
                 validation_data_path: Optional[str] = None, test_data_path: Optional[str] = None,
                 validation_dataset_reader: Optional[Reader] = None, test_dataset_reader: Optional[Reader] = None,
                 vocabulary: Optional[VocabularyConfig] = None, data_loader: Optional[DataLoaderConfig] = None,
                 task: Optional[str] = None, dataset: Optional[str] = None, seed: int = 13,
                 evaluate_on_test: bool = True, description: str = "",
                 test_sets: Optional[dict[str, EvaluationSet]] = None,
                 initializer: Optional[InitializerConfig] = None):
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
        self.test_sets = test_sets or {}  # name -> EvaluationSet (platform/test_sets.py)
        self.initializer = initializer  # a fresh run's first weights (platform/initializer.py)

    def reader_for(self, split: str) -> Reader:
        """The reader of ``split`` (one of ``READER_SPLITS``): ``test`` falls back to the
        validation reader and that to the training reader, as for the spec's own files."""
        readers = {"train": self.dataset_reader, "validation": self.validation_dataset_reader,
                   "test": self.test_dataset_reader}
        if split not in readers:
            raise ConfigurationError(f"reader: expected one of {', '.join(READER_SPLITS)}, got {split!r}")
        return readers[split]

    def model_class(self) -> type:
        """The registered model class the spec names (its ``count_vocab_items`` builds the vocabulary)."""
        return Model.by_name(self.model.type_name)


def validate_spec(spec: dict, source: Optional[str] = None, check_data_paths: bool = True) -> None:
    """Raise one SpecError listing every problem (data paths too, unless the spec comes from a
    run directory trained elsewhere) before anything is built."""
    problems = validate(spec, Experiment, check_files=check_data_paths)
    for key in ("train_data_path", "validation_data_path", "test_data_path") if check_data_paths else ():
        value = spec.get(key)
        if isinstance(value, str) and not is_there(value):
            problems.append(Problem(key, not_found(value), "file"))
    problems += spec_problems(spec, check_data_paths)
    problems += initializer_problems(spec) + vocabulary_problems(spec.get("vocabulary")) if check_data_paths else []
    problems += name_problems(spec)
    if check_data_paths:  # a new spec; a run directory's spec is loaded as it was trained
        problems += inherited_split_problems(spec)
    if problems:
        raise SpecError(problems, source)


def name_problems(spec: dict) -> list[Problem]:
    """``task`` and ``dataset`` name the run's MLflow experiment ``<task>/<dataset>`` and its artifact
    folder: each must be a safe name (``store_names.segment_problem``), found before any run
    directory or MLflow run is written. A missing ``dataset`` is the training file's folder name."""
    problems = []
    task = spec.get("task")
    if task is None or task == "":
        problems.append(Problem("task", "missing: the task names the run's MLflow experiment <task>/<dataset> "
                                        "(e.g. 'ner')", "missing"))
    elif isinstance(task, str) and segment_problem(task):
        problems.append(Problem("task", f"not a safe name: {segment_problem(task)}", "value"))
    dataset = spec.get("dataset")
    if isinstance(dataset, str) and dataset:
        why = segment_problem(dataset)
        if why:
            problems.append(Problem("dataset", f"not a safe name: {why}", "value"))
    elif (dataset is None or dataset == "") and isinstance(spec.get("train_data_path"), str):
        derived = Path(spec["train_data_path"]).parent.name
        why = segment_problem(derived)
        if why:
            problems.append(Problem("dataset", f"missing, and the folder of train_data_path ({derived!r}) is no "
                                               f"usable name ({why}): set dataset", "missing"))
    return problems


def inherited_split_problems(spec: dict) -> list[Problem]:
    """A test file read by the validation (or training) reader that keeps a hash-bucket ``split``
    would be scored on that bucket only, while reported as the whole file's."""
    if not spec.get("test_data_path") or spec.get("test_dataset_reader") is not None:
        return []
    key = "validation_dataset_reader" if spec.get("validation_dataset_reader") is not None else "dataset_reader"
    reader = spec.get(key)
    split = reader.get("split", "all") if isinstance(reader, dict) else "all"
    if split in ("all", "test"):
        return []
    return [Problem("test_data_path", f"read by {key}, which keeps split {split!r} (a hash bucket of its file): "
                                      "only that bucket of the test file would be scored; give "
                                      "test_dataset_reader (the same reader with split 'all' for a test file of "
                                      "its own, 'test' for the test bucket of a shared file)", "value")]


def identity(spec: dict) -> dict:
    """Task, dataset, model and encoder names of a spec, for tracking (not part of the spec hash)."""
    model = spec.get("model", {}) or {}
    return {
        "task": spec.get("task") or "",
        "dataset": spec.get("dataset") or Path(str(spec.get("train_data_path", "data"))).parent.name,
        "model": model.get("type", "") if isinstance(model, dict) else "",
        "encoder": encoder_name(model) if isinstance(model, dict) else "",
    }


def read_all(reader: Reader, path: Optional[str]) -> list:
    """Every instance ``reader`` reads from ``path`` (none without a path), as a progress stage."""
    from multigrain.platform.progress import progress

    return list(progress(reader.read(path), desc=f"reading {path}", unit="instances")) if path else []


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

    vocab = Vocabulary.from_counters(counters, exp.vocabulary.min_count, exp.vocabulary.max_size, extra)
    fixed = exp.vocabulary.fixed()
    return vocab.with_namespaces_of(fixed) if fixed is not None else vocab


def batches_for(model: Model, instances: list, cfg: DataLoaderConfig, seed: int, train: bool) -> BatchIterator:
    """Training batches (shuffled by seed and epoch, ``max_tokens`` applied, per field when the model
    has ``instance_lengths``) or evaluation batches."""
    if not train:
        return eval_batches(model, instances, cfg)
    per_field = getattr(model, "instance_lengths", None) if cfg.max_tokens is not None else None
    return BatchIterator(instances, model.tensorize, per_field or model.instance_length, batch_size=cfg.batch_size,
                         shuffle=cfg.shuffle, seed=seed, noise=cfg.bucket_noise, max_tokens=cfg.max_tokens)


def eval_batches(model: Model, instances: list, cfg: DataLoaderConfig, batch_size: Optional[int] = None) -> BatchIterator:
    """Length-bucketed evaluation batches of the spec's ``eval_batch_size`` (or ``batch_size``)."""
    return BatchIterator(instances, model.tensorize, model.instance_length, batch_size=batch_size or cfg.eval_batch_size,
                         shuffle=False, seed=0, noise=cfg.bucket_noise)
