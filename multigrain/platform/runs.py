"""A training run: one resolved spec, its run directory and its MLflow run.

``Run`` is made once from a resolved spec - validated once, hashed once, its ``Experiment``
built once - and is what ``multigrain train``, ``evaluate`` and ``predict``, the benchmark
scripts, Ray trials and ``evaluate-all`` go through. It owns

- the run's identity: the spec hash (plus the task/dataset/model/encoder names tracking uses);
- its directory (``runs/<spec>-<hash8>`` by default), which is also the model archive, and the
  plugin modules recorded there (``plugins``): named, never imported; each must be imported here
  by the user (``--include-package``) with its recorded source before the spec is read;
- one training at a time in that directory (``archive.training_lock``: a second process is
  refused with the first one's pid), and the order of a training call: refuse a directory that is
  no run directory (``run_marker``), reuse a finished result, make the plan (``run_plan``: fresh,
  resume from ``last.pt`` bit-identically, extend a finished run to more epochs, start from a
  shorter sibling), train (``run_training``; the final evaluation of ``best.pt``:
  ``final_evaluation``), logged live to MLflow through a ``RunLogger`` (``live_log``);
- the data-parallel executor, which it does not choose: a spec with ``trainer.workers`` above 1 is
  trained with the ``data_parallel`` its caller hands over (``multigrain train``: Ray Train's) and
  refused without one;
- the trained archive and its evaluation on a data file read with the spec's test (or another)
  reader (``run_archive``).

Nothing outside the run modules (this one, ``run_plan``) and ``training`` reads trainer keys from a
spec dict.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from multigrain.platform import archive as files
from multigrain.platform import plugins, run_archive, run_marker
from multigrain.platform.config import build
from multigrain.platform.data_parallel import DataParallel
from multigrain.platform.experiment import Experiment, identity, validate_spec
from multigrain.platform.live_log import EpochCallback, LiveLog
from multigrain.platform.run_plan import RunPlan
from multigrain.platform.run_training import check_data_parallel, train_run
from multigrain.platform.specs import spec_hash
from multigrain.platform.training import TrainerConfig


def default_run_dir(spec_path: Optional[str], digest: str, root: str | Path = "runs") -> Path:
    """``runs/<spec file stem>-<hash8>``: the spec's name and identity."""
    stem = Path(spec_path).name.split(".")[0] if spec_path else "run"
    return Path(root) / f"{stem}-{digest[:8]}"


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

    # the directory (``run_plan``) ------------------------------------------------
    @property
    def plan(self) -> RunPlan:
        """What a training may do with the run directory (read when asked: nothing is cached)."""
        return RunPlan(self.run_dir, self.spec, self.spec_hash, self.trainer)

    def finished_result(self) -> Optional[dict]:
        """``metrics.json`` of a finished run of this spec in the directory, else None; a finished
        run of another spec there is an error (never overwritten)."""
        return self.plan.finished_result()

    def has_checkpoint(self) -> bool:
        return self.plan.has_checkpoint()

    def is_empty(self) -> bool:
        """Absent, or holding nothing but the run-directory marker."""
        return self.plan.is_empty()

    def saved_spec_hash(self) -> Optional[str]:
        return self.plan.saved_spec_hash()

    def extension_refused(self, saved: dict) -> Optional[str]:
        """Why the run of ``saved`` cannot be continued as this spec (None when it can)."""
        return self.plan.extension_refused(saved)

    def shorter_sibling(self) -> Optional[Path]:
        """The run directory beside this one that this spec extends, or None (``RunPlan``)."""
        return self.plan.shorter_sibling()

    # training (``run_training``) -------------------------------------------------
    def train(self, resume: bool = False, stop_after_epoch: Optional[int] = None, logger=None,
              on_epoch: Optional[EpochCallback] = None, epoch_lines: bool = True,
              data_parallel: Optional[DataParallel] = None) -> dict:
        """Train (or continue) into the run directory; returns the summary also written to
        ``metrics.json``. With a ``tracking.RunLogger`` the run is logged live to MLflow: its
        MLflow run starts with the first finished epoch and ends FINISHED, KILLED (stopped early,
        resumable) or FAILED. ``epoch_lines``: print ``epoch_log``'s summary line per epoch. With
        ``trainer.workers`` above 1 the epochs run on the replicas ``data_parallel(run, workers)``
        launches (``data_parallel.Launcher``; Ray Train's: ``RayTrainCluster(...).launcher``) and
        this process does the rest: the run directory's files, the final evaluation, MLflow;
        without ``data_parallel`` such a spec is refused before anything is written there."""
        with files.training_lock(self.run_dir):
            return self._train_locked(resume, stop_after_epoch, logger, on_epoch, epoch_lines, data_parallel)

    def _train_locked(self, resume: bool, stop_after_epoch: Optional[int], logger, on_epoch: Optional[EpochCallback],
                      epoch_lines: bool, data_parallel: Optional[DataParallel]) -> dict:
        from multigrain.platform.tracking import git_commit

        run_marker.refuse_foreign(self.run_dir, resume)  # before anything is read or written there
        plan = self.plan
        done = plan.own_finished_result() if resume else None
        if done is not None:  # killed after its last write, or resumed twice: only tracking may be left
            if logger is not None:
                LiveLog(self, logger, None, True).complete(done)
            return done
        check_data_parallel(self.trainer, data_parallel)
        resume, extended = plan.decide(resume)
        commit = git_commit()  # at the start: the checkout may move on during a long training
        if logger is not None:
            logger.check_experiment(self.identity)
        live = LiveLog(self, logger, on_epoch, resume)
        try:
            result = train_run(self, resume, extended, stop_after_epoch, live, commit, epoch_lines, data_parallel)
        except BaseException as e:
            live.fail(interrupted=isinstance(e, KeyboardInterrupt))
            raise
        live.end(result)
        return result

    def train_or_reuse(self, logger=None, on_epoch: Optional[EpochCallback] = None, extend_siblings: bool = True,
                       epoch_lines: bool = True, data_parallel: Optional[DataParallel] = None) -> dict:
        """The result of a finished run in the directory, else train there: resume from its
        ``last.pt`` when an earlier attempt was interrupted, start over when it left no checkpoint.
        With ``extend_siblings`` a new directory starts from a copy of the longest sibling run that
        this spec extends (see ``shorter_sibling``), so asking for more epochs trains only the
        missing ones; the sibling is kept. Another process training in the directory is refused.
        ``data_parallel``: as for ``train`` (a finished result is reused without one)."""
        done = self.finished_result()
        if done is not None:  # reading a finished run takes no lock: many processes may reuse it
            return done
        with files.training_lock(self.run_dir):
            return self._train_or_reuse_locked(logger, on_epoch, extend_siblings, epoch_lines, data_parallel)

    def _train_or_reuse_locked(self, logger, on_epoch: Optional[EpochCallback], extend_siblings: bool,
                               epoch_lines: bool, data_parallel: Optional[DataParallel]) -> dict:
        plan = self.plan
        done = plan.finished_result()
        if done is not None:
            return done
        plan.refuse_other_spec()
        check_data_parallel(self.trainer, data_parallel)  # before a sibling is copied in
        if plan.is_empty() and extend_siblings:
            plan.copy_sibling()
        # resume: from last.pt, or from scratch when the earlier attempt finished no epoch
        return self._train_locked(not plan.is_empty(), None, logger, on_epoch, epoch_lines, data_parallel)

    # the archive (``run_archive``) -------------------------------------------------
    def prediction_refused(self) -> Optional[str]:
        """Why ``predict`` and ``serve`` refuse the run's model (its class's ``not_predicting``), or None."""
        reason = self.experiment.model_class().not_predicting
        return f"{self.run_dir}: {reason}" if reason else None

    def load_archive(self, weights: str = "best.pt", device: Optional[str] = None,
                     reader: str = "test") -> files.Archive:
        """The run's model with ``weights`` loaded, on ``device`` (default: the trainer's), reading
        data with the spec's ``reader`` (``Experiment.reader_for``: train, validation or test)."""
        return run_archive.load_archive(self, weights, device, reader)

    def evaluate(self, data_path: str, batch_size: Optional[int] = None, device: Optional[str] = None,
                 archive: Optional[files.Archive] = None, reader: str = "test") -> tuple[dict, int]:
        """(metrics of the best weights on ``data_path`` read with the spec's ``reader``, the
        number of instances the model scored: every one the reader keeps)."""
        scored = self.score(data_path, batch_size, device, archive, reader)
        return scored.metrics, scored.scored

    def score(self, data_path: str, batch_size: Optional[int] = None, device: Optional[str] = None,
              archive: Optional[files.Archive] = None, reader: str = "test") -> run_archive.Scores:
        """``evaluate`` with the counts: instances the reader kept and instances the model scored."""
        return run_archive.score(self, data_path, batch_size, device, archive, reader)
