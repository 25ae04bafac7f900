"""What a training may do with a run directory: the plan, made before anything is written there.

``RunPlan`` reads the directory of one resolved spec (``runs.Run``: its spec, spec hash and
``trainer`` section) and owns

- what it holds: a finished result of this spec (``finished_result``; a finished run of another
  spec is never overwritten), a ``last.pt`` to resume from, nothing at all (``is_empty``: absent,
  or only the run-directory marker), the spec hash it was trained with;
- whether a run there may be continued as this spec (``extension_refused``): only a larger
  ``trainer.num_epochs`` may differ, and only when the schedule does not depend on it;
- the decision (``decide``): a fresh run, resuming from ``last.pt`` (bit-identically), extending
  a finished run to more epochs, or starting over a directory whose training ended before its
  first epoch (only our own early files there, ``run_marker``);
- the sibling a new directory starts from (``shorter_sibling``, ``copy_sibling``): the run of the
  same spec with fewer epochs beside it, copied, so asking for more epochs trains only the
  missing ones.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from multigrain.platform import archive as files
from multigrain.platform import run_marker
from multigrain.platform.errors import ConfigurationError, SpecError
from multigrain.platform.specs import spec_hash
from multigrain.platform.training import TrainerConfig, trainer_settings


class RunPlan:
    """The run directory ``run_dir`` as a training of ``spec`` (hash ``digest``, ``trainer``
    section ``trainer``) finds it."""

    def __init__(self, run_dir: Path, spec: dict, digest: str, trainer: TrainerConfig):
        self.run_dir, self.spec, self.spec_hash, self.trainer = run_dir, spec, digest, trainer

    def finished_result(self) -> Optional[dict]:
        """``metrics.json`` of a finished run of this spec in the directory, else None; a finished
        run of another spec there is an error (never overwritten)."""
        done = files.read_result(self.run_dir)  # a damaged metrics.json: a ConfigurationError naming it
        if done is None or not done.get("finished"):
            return None
        if done.get("spec_hash") != self.spec_hash:
            raise ConfigurationError(f"{self.run_dir}: holds a finished run of another spec (hash "
                                     f"{str(done.get('spec_hash'))[:12]}, not {self.spec_hash[:12]}); "
                                     f"choose another run directory")
        return done

    def own_finished_result(self) -> Optional[dict]:
        """``metrics.json`` when it holds a finished run of exactly this spec (else None; a damaged
        one is a ConfigurationError naming it)."""
        return files.own_result(self.run_dir, self.spec_hash)

    def has_checkpoint(self) -> bool:
        return (self.run_dir / "last.pt").exists()

    def is_empty(self) -> bool:
        """Absent, or holding nothing but the run-directory marker."""
        return run_marker.is_empty(self.run_dir)

    def saved_spec_hash(self) -> Optional[str]:
        return spec_hash(files.read_spec(self.run_dir)) if (self.run_dir / "config.json").exists() else None

    def extension_refused(self, saved: dict, source: Optional[Path] = None) -> Optional[str]:
        """Why the run of ``saved`` cannot be continued as this spec (None when it can): only a
        larger ``trainer.num_epochs`` may differ, and the learning-rate schedule must not depend on
        it (then the continued run is the run the longer spec would have made). ``source``: the
        ``config.json`` it was read from, named when its ``trainer.num_epochs`` is no number of epochs."""
        same_otherwise = json.loads(json.dumps(saved))
        same_otherwise.setdefault("trainer", {})["num_epochs"] = self.spec.get("trainer", {}).get("num_epochs")
        if spec_hash(same_otherwise) != self.spec_hash:
            return ""
        try:
            old = trainer_settings(saved).num_epochs
        except SpecError as e:  # the saved spec is not validated when read
            raise SpecError(e.problems, str(source) if source is not None else None) from None
        new = self.trainer.num_epochs
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
            if self.extension_refused(saved, run / "config.json") is None:
                epochs = trainer_settings(saved).num_epochs
                if epochs > best_epochs:
                    best, best_epochs = run, epochs
        return best

    def decide(self, resume: bool) -> tuple[bool, bool]:
        """(resume from ``last.pt``, the resume extends a shorter run); refuses what must not be
        trained. ``--resume`` of a directory whose training ended before its first epoch (only our
        own early files there, see ``run_marker``) starts it over, removing only those. (A
        directory that is no run directory was refused before: ``run_marker.refuse_foreign``.)"""
        if not resume:
            if not self.is_empty():
                if not self.has_checkpoint() and run_marker.is_early(self.run_dir) and self.saved_spec_hash() is None:
                    raise ConfigurationError(f"{self.run_dir}: holds only what a training wrote there before it "
                                             f"stopped, before its first epoch; pass --resume to start it over or "
                                             f"choose another -s")
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
            why_not = self.extension_refused(saved, self.run_dir / "config.json")
            if why_not is not None:
                raise ConfigurationError(f"{self.run_dir}: --resume with a different spec (hash {saved_hash[:12]} "
                                         f"in the run, {self.spec_hash[:12]} given); resume with the run's own "
                                         f"spec{why_not}")
        return True, extended

    def refuse_other_spec(self) -> None:
        """Refuses a directory holding a run of another spec that this one cannot continue."""
        saved = self.saved_spec_hash()
        if saved is not None and saved != self.spec_hash and self.extension_refused(
                files.read_spec(self.run_dir), self.run_dir / "config.json") is not None:
            raise ConfigurationError(f"{self.run_dir}: holds a run of another spec (hash {saved[:12]}); "
                                     f"not overwriting it")

    def copy_sibling(self) -> None:
        """Starts this (empty) directory from a copy of ``shorter_sibling``, if there is one."""
        earlier = self.shorter_sibling()
        if earlier is None:
            return
        print(f"{self.run_dir}: continuing {earlier} (the same spec with fewer epochs)", flush=True)
        run_marker.copy_run(earlier, self.run_dir)
