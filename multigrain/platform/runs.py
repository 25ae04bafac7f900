"""A training run: one resolved spec, its run directory and its MLflow run.

``Run`` is made once from a resolved spec - validated once, hashed once, its ``Experiment``
built once - and is what ``multigrain train``, ``evaluate`` and ``predict``, the benchmark
scripts, Ray trials and ``evaluate-all`` go through. It owns

- the run's identity: the spec hash (plus the task/dataset/model/encoder names tracking uses);
- its directory (``runs/<spec>-<hash8>`` by default), which is also the model archive, and the
  plugin modules recorded there (``plugins``): named, never imported; each must be imported here
  by the user (``--include-package``) with its recorded source before the spec is read;
- the decision what to do with that directory (``run_marker``: a run directory is marked, a
  non-empty directory that is not one is refused, starting over removes only our files): a
  fresh run, resuming from ``last.pt``
  (bit-identically), extending a finished run to more epochs when nothing else changed and the
  schedule does not depend on the epoch count, or reusing a finished result; one training at a
  time in it (``archive.training_lock``: a second process is refused with the first one's pid);
- training through the ``Trainer`` (whose config holds the one "finished" rule), logged live to
  MLflow through a ``RunLogger``, one ``epoch_log`` line per epoch; and evaluation of the trained
  archive on a data file read with the spec's test (or another) reader.

Nothing outside this module and ``training`` reads trainer keys from a spec dict.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from multigrain.platform import archive as files
from multigrain.platform import plugins, run_marker
from multigrain.platform.config import build
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.experiment import (Experiment, batches_for, build_vocabulary, eval_batches, identity,
                                            read_all, validate_spec)
from multigrain.platform.live_log import EpochCallback, LiveLog
from multigrain.platform.specs import spec_hash
from multigrain.platform.test_sets import evaluate_test_sets, ranking_metric, read_test_sets, run_tags, tracking_tags
from multigrain.platform.training import TrainerConfig

if TYPE_CHECKING:
    from multigrain.platform.ray.train import RayTrainCluster


def default_run_dir(spec_path: Optional[str], digest: str, root: str | Path = "runs") -> Path:
    """``runs/<spec file stem>-<hash8>``: the spec's name and identity."""
    stem = Path(spec_path).name.split(".")[0] if spec_path else "run"
    return Path(root) / f"{stem}-{digest[:8]}"


def trainer_settings(spec: dict) -> TrainerConfig:
    """The typed ``trainer`` section of a resolved spec (cheap: builds no model, reads no data);
    for code that plans runs (sweeps, jobs) without making them."""
    return build(TrainerConfig, spec.get("trainer"), "trainer")


class Run:
    """One resolved spec trained into one run directory (``ext_vars``: its Jsonnet external variables)."""
    ext_vars: Optional[dict] = None

    def __init__(self, spec: dict, run_dir: str | Path | None = None, source: Optional[str] = None,
                 check_data_paths: bool = True):
        if run_dir is not None:  # the plugins a run there names must be imported by the user
            plugins.check_recorded(Path(run_dir))
        validate_spec(spec, source, check_data_paths)
        self.spec = spec
        self.source = source
        self.spec_hash = spec_hash(spec)
        self.identity = identity(spec)
        self.run_dir = Path(run_dir) if run_dir is not None else default_run_dir(source, self.spec_hash)
        if run_dir is None:
            plugins.check_recorded(self.run_dir)
        self.experiment: Experiment = build(Experiment, spec, validated=True)

    @classmethod
    def open(cls, run_dir: str | Path) -> "Run":
        """The run of an existing run directory (its data paths need not exist here)."""
        run_dir = Path(run_dir)
        return cls(files.read_spec(run_dir), run_dir, str(run_dir / "config.json"), check_data_paths=False)

    @property
    def trainer(self) -> TrainerConfig:
        return self.experiment.trainer

    # the directory ----------------------------------------------------------
    def finished_result(self) -> Optional[dict]:
        """``metrics.json`` of a finished run of this spec in the directory, else None; a finished
        run of another spec there is an error (never overwritten)."""
        path = self.run_dir / "metrics.json"
        if not path.exists():
            return None
        done = json.loads(path.read_text(encoding="utf-8"))
        if not done.get("finished"):
            return None
        if done.get("spec_hash") != self.spec_hash:
            raise ConfigurationError(f"{self.run_dir}: holds a finished run of another spec (hash "
                                     f"{str(done.get('spec_hash'))[:12]}, not {self.spec_hash[:12]}); "
                                     f"choose another run directory")
        return done

    def _own_finished_result(self) -> Optional[dict]:
        """``metrics.json`` when it holds a finished run of exactly this spec (else None)."""
        try:
            done = json.loads((self.run_dir / "metrics.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return done if done.get("finished") and done.get("spec_hash") == self.spec_hash else None

    def has_checkpoint(self) -> bool:
        return (self.run_dir / "last.pt").exists()

    def is_empty(self) -> bool:
        """Absent, or holding nothing but the run-directory marker."""
        return run_marker.is_empty(self.run_dir)

    def saved_spec_hash(self) -> Optional[str]:
        return spec_hash(files.read_spec(self.run_dir)) if (self.run_dir / "config.json").exists() else None

    def extension_refused(self, saved: dict) -> Optional[str]:
        """Why the run of ``saved`` cannot be continued as this spec (None when it can): only a
        larger ``trainer.num_epochs`` may differ, and the learning-rate schedule must not depend on
        it (then the continued run is the run the longer spec would have made)."""
        same_otherwise = json.loads(json.dumps(saved))
        same_otherwise.setdefault("trainer", {})["num_epochs"] = self.spec.get("trainer", {}).get("num_epochs")
        if spec_hash(same_otherwise) != self.spec_hash:
            return ""
        old, new = trainer_settings(saved).num_epochs, self.trainer.num_epochs
        if new <= old:
            return f" (only trainer.num_epochs differs: {old} in the run, {new} given; a run can be extended, not cut)"
        if self.trainer.schedule_depends_on_epochs:
            return (f" (only trainer.num_epochs differs, but the {self.trainer.scheduler.type_name!r} schedule "
                    f"depends on it, so {new} epochs from this run would not be a {new}-epoch run)")
        return None

    def shorter_sibling(self) -> Optional[Path]:
        """The run directory beside this one that this spec extends (same spec with fewer epochs,
        see ``extension_refused``, and a ``last.pt``) with the most epochs, or None."""
        parent = self.run_dir.parent
        if not parent.is_dir():
            return None
        best, best_epochs = None, -1
        for run in sorted(parent.iterdir()):
            if run.name.endswith(".copying") or not (run / "config.json").is_file() or not (run / "last.pt").is_file():
                continue
            saved = files.read_spec(run)
            if self.extension_refused(saved) is None:
                epochs = trainer_settings(saved).num_epochs
                if epochs > best_epochs:
                    best, best_epochs = run, epochs
        return best

    def _plan(self, resume: bool) -> tuple[bool, bool]:
        """(resume from ``last.pt``, the resume extends a shorter run); refuses what must not be
        trained. ``--resume`` of a directory whose training ended before its first epoch (only our
        own early files there, see ``run_marker``) starts it over, removing only those. (A
        directory that is no run directory was refused before: ``run_marker.refuse_foreign``.)"""
        if not resume:
            if not self.is_empty():
                raise ConfigurationError(f"{self.run_dir}: the run directory exists and is not empty; "
                                         f"pass --resume to continue it or choose another -s")
            return False, False
        if not self.has_checkpoint():
            if (self.run_dir.is_dir() and run_marker.is_early(self.run_dir)
                    and self.saved_spec_hash() in (None, self.spec_hash)):
                run_marker.clear(self.run_dir)
                return False, False
            raise ConfigurationError(f"{self.run_dir}: nothing to resume (no last.pt)")
        saved = files.read_spec(self.run_dir)
        saved_hash = spec_hash(saved)
        extended = saved_hash != self.spec_hash
        if extended:
            why_not = self.extension_refused(saved)
            if why_not is not None:
                raise ConfigurationError(f"{self.run_dir}: --resume with a different spec (hash {saved_hash[:12]} "
                                         f"in the run, {self.spec_hash[:12]} given); resume with the run's own "
                                         f"spec{why_not}")
        return True, extended

    # training ---------------------------------------------------------------
    def train(self, resume: bool = False, stop_after_epoch: Optional[int] = None, logger=None,
              on_epoch: Optional[EpochCallback] = None, epoch_lines: bool = True,
              cluster: Optional["RayTrainCluster"] = None) -> dict:
        """Train (or continue) into the run directory; returns the summary also written to
        ``metrics.json``. With a ``tracking.RunLogger`` the run is logged live to MLflow: its
        MLflow run starts with the first finished epoch and ends FINISHED, KILLED (stopped early,
        resumable) or FAILED. ``epoch_lines``: print ``epoch_log``'s summary line per epoch. With
        ``trainer.workers`` above 1 the epochs run on Ray Train (``platform/ray/train.py``;
        ``cluster``: which Ray, by default one started here) and this process does the rest: the
        run directory's files, the final evaluation, MLflow."""
        with files.training_lock(self.run_dir):
            return self._train_locked(resume, stop_after_epoch, logger, on_epoch, epoch_lines, cluster)

    def _train_locked(self, resume: bool, stop_after_epoch: Optional[int], logger, on_epoch: Optional[EpochCallback],
                      epoch_lines: bool, cluster: Optional["RayTrainCluster"]) -> dict:
        from multigrain.platform.tracking import git_commit

        run_marker.refuse_foreign(self.run_dir, resume)  # before anything is read or written there
        done = self._own_finished_result() if resume else None
        if done is not None:  # killed after its last write, or resumed twice: only tracking may be left
            if logger is not None:
                LiveLog(self, logger, None, True).complete(done)
            return done
        resume, extended = self._plan(resume)
        commit = git_commit()  # at the start: the checkout may move on during a long training
        live = LiveLog(self, logger, on_epoch, resume)
        try:
            result = self._train(resume, extended, stop_after_epoch, live, commit, epoch_lines, cluster)
        except BaseException as e:
            live.fail(interrupted=isinstance(e, KeyboardInterrupt))
            raise
        live.end(result)
        return result

    def _train(self, resume: bool, extended: bool, stop_after_epoch: Optional[int], live: "LiveLog",
               commit: str, epoch_lines: bool, cluster: Optional["RayTrainCluster"]) -> dict:
        from multigrain.platform.artifacts import sample_predictions
        from multigrain.platform.epoch_log import print_epoch_line
        from multigrain.platform.training import (Trainer, describe_device, evaluate, pick_device, refusal,
                                                  seed_everything, write_json)

        exp, run_dir = self.experiment, self.run_dir
        seed_everything(exp.seed)
        started = time.time()
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

        check_training_memory(exp.model, vocab, run_dir, exp.trainer.cuda_device, source=self.source)
        model = exp.model.construct(vocab=vocab, offered={"resources": files.run_resources(run_dir) if resume
                                                          else run_marker.fresh_resources(run_dir, train)})
        reported = set(model.get_metrics(reset=True)) | {"loss"}
        if dev and exp.trainer.metric_name not in reported:
            raise ConfigurationError(f"trainer.validation_metric: the model reports no metric "
                                     f"{exp.trainer.metric_name!r}; it reports {', '.join(sorted(reported))}")
        train_batches = batches_for(model, train, exp.data_loader, exp.seed, True)  # checks max_tokens

        replicas = None
        if exp.trainer.workers > 1:
            from multigrain.platform.ray.train import RayTrainCluster

            replicas = (cluster or RayTrainCluster()).launcher(self, exp.trainer.workers)
        device = pick_device(exp.trainer.cuda_device)  # this process's: the final evaluation's
        why_not = refusal(exp.trainer, replicas.device if replicas else device)  # precision, compile
        if why_not:
            raise ConfigurationError(why_not)

        run_marker.mark(run_dir)  # makes it, the marker first (unless fitting a resource marked it)
        if not resume:
            files.write_run_files(run_dir, self.spec, vocab)
        elif extended:  # the run is now the longer spec's; its vocabulary stays
            files.write_run_spec(run_dir, self.spec)
        if not resume or extended or not (run_dir / plugins.PLUGINS_FILE).exists():
            plugins.record(run_dir, self.spec)
        validation = eval_batches(model, dev, exp.data_loader) if dev else None
        if replicas:
            summary, finished, seconds_before = replicas.train(resume, stop_after_epoch, live, epoch_lines)
        else:
            def on_epoch(epoch: int, record: dict) -> None:
                if epoch_lines:
                    print_epoch_line(trainer, record)
                live.epoch(epoch, record, trainer.history)

            trainer = Trainer(exp.trainer, model, train_batches, validation, run_dir, on_epoch=on_epoch)
            if resume:
                trainer.restore(run_dir / "last.pt")
            summary = trainer.train(stop_after_epoch=stop_after_epoch)
            finished, seconds_before, device = trainer.finished, trainer.seconds_before, trainer.device

        result = {"spec_hash": self.spec_hash, "run_dir": str(run_dir), "source": self.source, **self.identity,
                  "leaderboard_metric": model.leaderboard_metric, "finished": finished, **summary,
                  **({"ext_vars": self.ext_vars} if self.ext_vars else {})}
        if finished:
            model.to(device)
            files.load_weights(model, run_dir / "best.pt", device)
            scoped = {}  # the model's tags after each evaluation (a translator's signature names its references)
            if dev:
                result["validation"] = evaluate(model, validation, device, "dev (best)")
                scoped["validation"] = tracking_tags(model)
            if test:
                result["test"] = evaluate(model, eval_batches(model, test, exp.data_loader), device, "test (best)")
                scoped["test"] = tracking_tags(model)
                result["leaderboard_metric"] = ranking_metric(model)  # e.g. cased BLEU for cased references
            report = getattr(model, "report", None)
            if callable(report) and test:
                result["test_report"] = report()
            confusion = getattr(model, "confusion", None)  # gold x predicted counts (classifiers)
            if callable(confusion) and test:
                result["test_confusion"] = confusion()
            result.update(evaluate_test_sets(exp, model, device, test_sets,
                                             lambda data: eval_batches(model, data, exp.data_loader)))
            tags = run_tags(scoped, result.get("test_sets"), self.identity.get("dataset"))
            if tags:
                result["tracking_tags"] = tags
            if test:  # a sample of test predictions, shown in the MLflow UI
                result["test_samples"] = sample_predictions(files.Archive(
                    run_dir, self.spec, model, vocab, exp.test_dataset_reader, device, exp.data_loader), test)
        result["seconds"] = time.time() - started + seconds_before
        result["device"] = replicas.describe() if replicas else describe_device(device)
        result["git_commit"] = commit  # `multigrain log` tags the MLflow run with it
        write_json(run_dir / "metrics.json", result)
        return result

    def train_or_reuse(self, logger=None, on_epoch: Optional[EpochCallback] = None,
                       extend_siblings: bool = True, epoch_lines: bool = True) -> dict:
        """The result of a finished run in the directory, else train there: resume from its
        ``last.pt`` when an earlier attempt was interrupted, start over when it left no checkpoint.
        With ``extend_siblings`` a new directory starts from a copy of the longest sibling run that
        this spec extends (see ``shorter_sibling``), so asking for more epochs trains only the
        missing ones; the sibling is kept. Another process training in the directory is refused."""
        done = self.finished_result()
        if done is not None:  # reading a finished run takes no lock: many processes may reuse it
            return done
        with files.training_lock(self.run_dir):
            return self._train_or_reuse_locked(logger, on_epoch, extend_siblings, epoch_lines)

    def _train_or_reuse_locked(self, logger, on_epoch: Optional[EpochCallback], extend_siblings: bool,
                               epoch_lines: bool) -> dict:
        done = self.finished_result()
        if done is not None:
            return done
        saved = self.saved_spec_hash()
        if saved is not None and saved != self.spec_hash and self.extension_refused(
                files.read_spec(self.run_dir)) is not None:
            raise ConfigurationError(f"{self.run_dir}: holds a run of another spec (hash {saved[:12]}); "
                                     f"not overwriting it")
        if self.is_empty() and extend_siblings:
            self._copy_sibling()
        # resume: from last.pt, or from scratch when the earlier attempt finished no epoch
        return self._train_locked(not self.is_empty(), None, logger, on_epoch, epoch_lines, None)

    def _copy_sibling(self) -> None:
        earlier = self.shorter_sibling()
        if earlier is None:
            return
        print(f"{self.run_dir}: continuing {earlier} (the same spec with fewer epochs)", flush=True)
        run_marker.copy_run(earlier, self.run_dir)

    # the archive -------------------------------------------------------------
    def load_archive(self, weights: str = "best.pt", device: Optional[str] = None,
                     reader: str = "test") -> files.Archive:
        """The run's model with ``weights`` loaded, on ``device`` (default: the trainer's), reading
        data with the spec's ``reader`` (``Experiment.reader_for``: train, validation or test)."""
        import torch

        from multigrain.platform.training import pick_device

        if not (self.run_dir / weights).exists():
            raise ConfigurationError(f"{self.run_dir}: no {weights} (did the training finish an epoch?)")
        vocab = files.read_vocabulary(self.run_dir)
        model = self.experiment.model.construct(vocab=vocab, offered={"resources": files.run_resources(self.run_dir)})
        dev = pick_device(self.trainer.cuda_device) if device is None else torch.device(device)
        model.to(dev)
        files.load_weights(model, self.run_dir / weights, dev)
        model.eval()
        return files.Archive(self.run_dir, self.spec, model, vocab, self.experiment.reader_for(reader), dev,
                             self.experiment.data_loader)

    def evaluate(self, data_path: str, batch_size: Optional[int] = None, device: Optional[str] = None,
                 archive: Optional[files.Archive] = None, reader: str = "test") -> tuple[dict, int]:
        """(metrics of the best weights on ``data_path`` read with the spec's ``reader``, the
        number of instances the model scored: every one the reader keeps)."""
        scored = self.score(data_path, batch_size, device, archive, reader)
        return scored.metrics, scored.scored

    def score(self, data_path: str, batch_size: Optional[int] = None, device: Optional[str] = None,
              archive: Optional[files.Archive] = None, reader: str = "test") -> "Scores":
        """``evaluate`` with the counts: instances the reader kept and instances the model scored."""
        from multigrain.platform.training import evaluate_counted

        archive = archive or self.load_archive(device=device)
        read_with = self.experiment.reader_for(reader)
        instances = archive.read(data_path, read_with)
        metrics, scored = evaluate_counted(archive.model, archive.batches(instances, batch_size), archive.device,
                                           desc=f"evaluate {data_path}")
        return Scores(metrics, len(instances), scored, reader, getattr(read_with, "registered_name", ""),
                      getattr(read_with, "split", None))


@dataclass(frozen=True)
class Scores:
    """What ``Run.score`` measured: the metrics, instances read and scored, and the reader used
    (the spec's ``reader`` split, its registered type, and its own ``split`` option if it has one)."""

    metrics: dict
    read: int
    scored: int
    reader: str
    reader_type: str
    reader_split: Optional[str]
