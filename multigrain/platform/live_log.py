"""Live MLflow logging of one ``Run.train`` call (``runs.Run``), kept to one MLflow run per run
directory across resumes and kills."""
from __future__ import annotations

import json
from typing import Callable, Optional

EpochCallback = Callable[[int, dict], None]


class LiveLog:
    """Live MLflow logging of one ``Run.train`` call. A run directory has one MLflow run: it starts
    at the first finished epoch (a spec or data error leaves none behind), is recorded in the
    directory's ``tracking.json``, and a resumed training logs into it again (the epochs it missed,
    e.g. after a kill, first). It ends FINISHED, KILLED (stopped or interrupted: resumable) or
    FAILED; one left RUNNING by a killed process is marked KILLED when the next training of the
    directory starts."""

    RECORD = "tracking.json"

    def __init__(self, run, logger, on_epoch: Optional[EpochCallback], resumed: bool):
        self.run, self.logger, self.on_epoch, self.started = run, logger, on_epoch, False
        self.resumed = resumed
        self.record = run.run_dir / self.RECORD
        if logger is not None:
            self._mark_killed()

    def _recorded_run(self) -> Optional[str]:
        """The MLflow run of this directory: the one ``tracking.json`` names, or (resuming a
        training killed between creating its MLflow run and recording it) the latest unfinished
        run tagged with this directory and spec hash."""
        try:
            saved = json.loads(self.record.read_text(encoding="utf-8"))
            if saved.get("tracking_uri") == self.logger.uri:
                return saved.get("run_id")
        except (OSError, ValueError):
            pass
        if not self.resumed:
            return None
        from multigrain.platform.tracking import unfinished_run

        return unfinished_run(self.logger.uri, self.run.identity, self.run.spec_hash, str(self.run.run_dir))

    def _mark_killed(self) -> None:
        run_id = self._recorded_run()
        if run_id is None:
            return
        from multigrain.platform.tracking import open_store

        client = open_store(self.logger.uri)
        if client.get_run(run_id).info.status == "RUNNING":  # its process was killed
            client.set_terminated(run_id, "KILLED")

    def _start(self, earlier_epochs: list[dict]) -> None:
        """Start (or continue) the MLflow run, logging the ``earlier_epochs`` it lacks."""
        if self.logger is None or self.started:
            return
        self.started = True
        logged: set[int] = set()
        earlier = self._recorded_run()
        if earlier is not None and self.logger.continue_run(earlier):
            logged = self.logger.logged_epochs()
        else:
            from multigrain.platform.training import write_json

            run = self.run
            self.logger.start(run.spec, run.identity, run.spec_hash, str(run.run_dir), source=run.source)
            write_json(self.record, {"tracking_uri": self.logger.uri, "run_id": self.logger.run_id})
        for record in earlier_epochs:
            if record["epoch"] not in logged:
                self.logger.log_epoch(record["epoch"], record)

    def epoch(self, epoch: int, record: dict, history: list[dict]) -> None:
        if self.logger is not None:
            self._start(history[:-1])
            self.logger.log_epoch(epoch, record)
        if self.on_epoch is not None:
            self.on_epoch(epoch, record)

    def complete(self, result: dict) -> None:
        """Bring the MLflow run of a finished training up to date (FINISHED, every epoch), unless
        it already is."""
        from mlflow.exceptions import MlflowException

        from multigrain.platform.tracking import open_store

        run_id = self._recorded_run()
        if run_id is not None:
            try:
                if open_store(self.logger.uri).get_run(run_id).info.status == "FINISHED":
                    return
            except MlflowException:
                pass
        self.end(result)

    def fail(self, interrupted: bool) -> None:
        if self.logger is not None and self.started:
            self.logger.end("KILLED" if interrupted else "FAILED")

    def end(self, result: dict) -> None:
        if self.logger is None:
            return
        self._start(result.get("history", []))
        if result.get("finished"):
            from multigrain.platform.tracking import record_test_sets

            # the test sets' leaderboard rows first: a kill before FINISHED is repaired by a resume
            record_test_sets(self.run.spec, result, self.logger.uri, self.run.source)
            self.logger.finish(result, str(self.run.run_dir))
        else:
            self.logger.end("KILLED")
