"""Hostile input to the tracking store: climbing experiment names, hostile rows of a portable
leaderboard file, a run directory with wrong types, tracking URIs that are no store, a file that
is not a SQLite database, an unknown ranking metric and a full disk. Each is one clear error
(exit 2) within seconds, writes nothing outside the store, imports nothing by halves, overwrites
nothing and leaves no MLflow run RUNNING. Stores are made in tmp folders from small files (no
training)."""
import errno
import json
import math
import socket
import time
from pathlib import Path

import pytest

from multigrain.platform.commands import main as cli_main
from multigrain.testing import bilstm_tagger, copy_sentences, tiny_spec
from tests.conftest import DATA, mlflow_runs, run_cli

HASH = "ab" * 32
SQLITE_HEADER = b"SQLite format 3\x00"


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def row(run_id="r1", experiment="ner/resume", **changes):
    """One run of a portable leaderboard file."""
    run = {"id": run_id, "experiment": experiment, "name": f"run {run_id}", "status": "FINISHED",
           "start_time": 1_700_000_000_000, "end_time": 1_700_000_100_000,
           "tags": {"leaderboard": "true", "spec_hash": HASH, "seed_group": "g-" + run_id, "seed": "7",
                    "leaderboard_metric": "test_f1", "task": "ner", "dataset": "resume"},
           "metrics": {"test_f1": 0.9, "validation_f1": 0.8}, "params": {"seed": "7"},
           "history": {"validation_f1": [[1, 0.7], [2, 0.8]]}}
    run.update(changes)
    return run


def board_file(path: Path, runs: list, raw: str = None) -> Path:
    text = raw if raw is not None else json.dumps({"format": "multigrain-leaderboard", "version": 1, "runs": runs})
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """``store/`` holds the store (``m.db``, artifacts in ``store/mlruns``); ``outside/`` must stay empty."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "store").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path, f"sqlite:///{tmp_path / 'store' / 'm.db'}"


def everything_under(folder: Path) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def statuses(uri: str) -> list:
    return sorted(r.info.status for r in mlflow_runs(uri))


# 1 ------------------------------------------------------------------ writes outside the store
def test_climbing_experiment_names_write_nothing_outside_the_store(layout, capsys):
    tmp, uri = layout
    outside = tmp / "outside"
    for name in ("../../outside/X", str(outside / "abs"), "ner/../../../outside", "ner/resume/extra", "ner\\..\\x"):
        bad = board_file(tmp / "bad.json", [row(experiment=name)])
        code, _, err = cli(capsys, "leaderboard", "--import", bad, "--tracking-uri", uri)
        assert code == 2 and err.startswith(f"error: {bad}: runs[0] (id r1): experiment: ") and "\n" not in err.strip()
    assert everything_under(outside) == [] and not (tmp / "store" / "m.db").exists()
    assert cli(capsys, "leaderboard", "--import", "", "--tracking-uri", uri)[1:] == (
        "", "error: --import: an empty path (name a leaderboard file)\n")  # not "give a TASK", not the folder "."

    # a spec whose dataset (or task) climbs: a spec error naming the key, before any run directory
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp / "train.bmes", 8)
    for key, value in (("dataset", "../../.."), ("task", "ner/../../outside"), ("dataset", str(outside))):
        spec = tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train, task="ner", dataset="resume")
        spec[key] = value
        (tmp / "climb.json").write_text(json.dumps(spec), encoding="utf-8")
        code, _, err = cli(capsys, "train", tmp / "climb.json", "-s", tmp / "run", "--tracking-uri", uri)
        assert code == 2 and f"error: {tmp / 'climb.json'}: 1 error in spec:\n  {key}: not a safe name: " in err
    code, _, err = cli(capsys, "train", tmp / "climb.json", "-o", "dataset=../x", "--tracking-uri", uri)
    assert code == 2 and "dataset: not a safe name: '../x' holds '/'" in err
    assert not (tmp / "run").exists() and not (tmp / "runs").exists() and everything_under(outside) == []

    # a store that already holds an experiment located outside (made before this check): no artifact lands there
    from mlflow.tracking import MlflowClient

    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.tracking import experiment_id, log_artifact, open_store

    client = open_store(uri)
    with pytest.raises(ConfigurationError, match=r"experiment name '\.\./x': its task is no safe name"):
        experiment_id(client, "../x")
    legacy = MlflowClient(uri).create_experiment("ner/legacy", artifact_location=str(outside / "legacy"))
    run_id = client.create_run(legacy).info.run_id
    (tmp / "note.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="outside the store's artifact folder"):
        log_artifact(client, run_id, str(tmp / "note.json"))
    assert everything_under(outside) == []


# 2 ------------------------------------------------------------------ hostile rows of an import
HOSTILE_ROWS = [
    ({"history": {"validation_f1": [[2 ** 70, 0.8]]}}, "history.validation_f1[0]: expected a whole number from"),
    ({"metrics": {"../x": 0.5}}, "metrics.../x: the key '../x' reads as the path"),
    ({"metrics": {"test_f1": math.nan}}, "metrics.test_f1: expected a finite number, got nan"),
    ({"metrics": {"test_f1": math.inf}}, "metrics.test_f1: expected a finite number, got inf"),
    ({"metrics": {"test_f1": "high"}}, 'metrics.test_f1: expected a number, got "high"'),
    ({"metrics": {"test_f1": 10 ** 400}}, "metrics.test_f1: expected a number, got a whole number of 401 digits"),
    ({"metrics": {"test_f1": True}}, "metrics.test_f1: expected a number, got true"),
    ({"metrics": {"a\u0000b": 1.0}}, "holds a character other than"),
    ({"history": {"train_loss": [[True, 1.0]]}}, "history.train_loss[0]: expected a whole number, got true"),
    ({"start_time": 2 ** 70}, "start_time: milliseconds since 1970: expected a whole number from 0 to"),
    ({"tags": {"/etc/x": "1"}}, "tags./etc/x: the key '/etc/x' reads as the path"),
    ({"params": {"lr": 0.01}}, "params.lr: expected a string, got 0.01"),
    ({"params": {"lr": "x" * 6001}}, "params.lr: a string of 6001 characters (at most 6000)"),
    ({"params": {"x" * 251: "1"}}, f"params.{'x' * 251}: the key '{'x' * 40}'... has 251 characters (at most 250)"),
    ({"name": "a\u0000"}, "name: a string holding a NUL character"),
]


def test_a_store_copied_elsewhere_is_refused_before_a_run_writes_into_the_original(layout, capsys):
    """A copied (or moved) store's experiments keep their artifact folder where the store was: a run
    would write there. It is refused when the experiment is opened; a training, before its first
    batch (it was refused after its last epoch)."""
    import shutil

    from multigrain.platform.store import experiment_id, open_store

    tmp, uri = layout
    assert cli(capsys, "leaderboard", "--import", board_file(tmp / "b.json", [row()]), "--tracking-uri", uri)[0] == 0
    (tmp / "copy").mkdir()
    shutil.copy(tmp / "store" / "m.db", tmp / "copy" / "m.db")
    copied = open_store(f"sqlite:///{tmp / 'copy' / 'm.db'}")
    with pytest.raises(Exception, match=(f"experiment 'ner/resume' keeps its artifacts at .*store/mlruns/ner/resume, "
                                         f"outside the store's artifact folder {tmp / 'copy' / 'mlruns'}: the store "
                                         f"was moved or copied")):
        experiment_id(copied, "ner/resume")
    assert experiment_id(copied, "ner/weibo")  # a new experiment of the copy is its own
    assert experiment_id(open_store(uri), "ner/resume")  # the original is fine
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp / "train.bmes", 8)
    (tmp / "spec.json").write_text(json.dumps(tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train,
                                                        task="ner", dataset="resume")), encoding="utf-8")
    code, out, err = cli(capsys, "train", tmp / "spec.json", "-s", tmp / "run", "--tracking-uri",
                         f"sqlite:///{tmp / 'copy' / 'm.db'}")
    assert code == 2 and "error: experiment 'ner/resume' keeps its artifacts at" in err and "epoch" not in out
    assert not (tmp / "run").exists() and everything_under(tmp / "outside") == []


def test_a_hostile_row_is_one_error_naming_file_and_row_and_nothing_is_imported(layout, capsys):
    tmp, uri = layout
    first = board_file(tmp / "first.json", [row("old")])
    assert cli(capsys, "leaderboard", "--import", first, "--tracking-uri", uri)[0] == 0
    for change, message in HOSTILE_ROWS:  # after a good row of the same file
        bad = board_file(tmp / "bad.json", [row("good"), row("evil", **change)])
        code, _, err = cli(capsys, "leaderboard", "--import", bad, "--tracking-uri", uri)
        assert code == 2 and err.startswith(f"error: {bad}: runs[1] (id evil): ") and message in err, err
        assert len(err.strip().splitlines()) == 1
    runs = mlflow_runs(uri)
    assert [r.data.tags["portable_id"] for r in runs] == ["old"]  # not even the good row of a bad file
    assert everything_under(tmp / "outside") == []


def test_deep_nesting_is_one_error_naming_the_file(layout, capsys):
    tmp, uri = layout
    deep = board_file(tmp / "deep.json", [], raw="[" * 100_000)
    started = time.monotonic()
    code, _, err = cli(capsys, "leaderboard", "--import", deep, "--tracking-uri", uri)
    assert code == 2 and err.strip() == f"error: {deep}: not usable JSON (nested deeper than 200 levels)"
    assert time.monotonic() - started < 10 and not (tmp / "store" / "m.db").exists()
    broken = board_file(tmp / "broken.json", [], raw='{"format": "multigrain-leaderboard",\n "runs": [}')
    code, _, err = cli(capsys, "leaderboard", "--import", broken, "--tracking-uri", uri)
    assert code == 2 and err.strip() == f"error: {broken}: not JSON (Expecting value at line 2 column 11)"


def test_an_import_failing_midway_leaves_none_of_its_runs(layout, capsys, monkeypatch):
    """All or nothing also when the store fails while writing (here: the second run)."""
    from multigrain.platform import portable

    tmp, uri = layout
    written = []
    real = portable._write_run

    def second_fails(client, run_id, run, done):
        written.append(run["id"])
        if len(written) == 2:
            raise RuntimeError("the store went away")
        real(client, run_id, run, done)

    monkeypatch.setattr(portable, "_write_run", second_fails)
    with pytest.raises(RuntimeError, match="the store went away"):
        cli(capsys, "leaderboard", "--import", board_file(tmp / "two.json", [row("a"), row("b")]), "--tracking-uri", uri)
    assert written == ["a", "b"]
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    assert client.search_runs(ids, run_view_type=ViewType.ACTIVE_ONLY) == []
    monkeypatch.setattr(portable, "_write_run", real)  # a later import adds both, whole
    code, _, err = cli(capsys, "leaderboard", "--import", tmp / "two.json", "--tracking-uri", uri)
    assert code == 0 and "imported 2 runs (0 already in the store)" in err



def test_a_run_an_import_killed_part_way_left_is_added_whole_by_the_next(layout, capsys):
    """SIGKILL leaves no clean-up: the run being written stayed RUNNING, without its curves, and
    every later import counted it as there."""
    from mlflow.tracking import MlflowClient

    from multigrain.platform.portable import IMPORTING_TAG
    from multigrain.platform.store import experiment_id, open_store

    tmp, uri = layout
    client = open_store(uri)
    cut_short = client.create_run(experiment_id(client, "ner/resume"),
                                  tags={"portable_id": "b", IMPORTING_TAG: "true", "leaderboard": "true"})
    code, _, err = cli(capsys, "leaderboard", "--import", board_file(tmp / "two.json", [row("a"), row("b")]),
                       "--tracking-uri", uri)
    assert code == 0 and "imported 2 runs (0 already in the store)" in err
    runs = mlflow_runs(uri)
    assert sorted((r.data.tags["portable_id"], r.info.status) for r in runs) == [("a", "FINISHED"), ("b", "FINISHED")]
    assert not any(IMPORTING_TAG in r.data.tags for r in runs)
    assert cut_short.info.run_id not in {r.info.run_id for r in runs}
    assert MlflowClient(uri).list_artifacts([r for r in runs if r.data.tags["portable_id"] == "b"][0].info.run_id)

# 3 ------------------------------------------------------------------ multigrain log of wrong types
def run_dir(folder: Path, config: dict | None = None, **changes) -> Path:
    """A finished run directory as ``train --no-tracking`` leaves it (metrics.json and config.json,
    ``config``, whose spec hash metrics.json records)."""
    from multigrain.platform.specs import spec_hash

    folder.mkdir(parents=True, exist_ok=True)
    config = config or {"task": "ner", "dataset": "resume", "seed": 7}
    result = {"finished": True, "task": "ner", "dataset": "resume", "model": "tagger", "encoder": "bilstm",
              "spec_hash": spec_hash(config), "leaderboard_metric": "f1", "git_commit": "abc123",
              "history": [{"epoch": 1, "train_loss": 2.5, "validation_f1": 0.5},
                          {"epoch": 2, "train_loss": 1.5, "validation_f1": 0.6}],
              "validation": {"f1": 0.6}, "test": {"f1": 0.55}, "seconds": 3.0, "epochs_completed": 2,
              "best_epoch": 2}
    result.update(changes)
    (folder / "metrics.json").write_text(json.dumps(result), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


@pytest.mark.parametrize("change, message", [
    ({"test": {"f1": "high"}}, 'test.f1: expected a number, got "high"'),
    ({"test": [0.5]}, "test: expected an object of numbers, got a list"),
    ({"history": [{"epoch": "one", "train_loss": 1.0}]}, 'history[0].epoch: expected a whole number, got "one"'),
    ({"history": [{"epoch": 1, "../x": 1.0}]}, "history[0]: the key '../x' reads as the path"),
    ({"seconds": 10 ** 400}, "seconds: expected a number, got a whole number of 401 digits"),
    ({"dataset": "../../outside"}, "task/dataset: 'ner/../../outside': expected <task>/<dataset>"),
    ({"spec_hash": "x' or '1'='1"}, "spec_hash: expected a spec hash (hexadecimal)"),
    ({"test_sets": {"wmt": {"data": "x", "metrics": {"bleu": None}}}}, "test_sets.wmt.metrics.bleu: expected a number, got null"),
    ({"test_confusion": {"labels": ["0", "1"], "matrix": [[1, 2]]}}, "test_confusion: matrix: expected 2 rows of 2"),
    ({"model": 5}, "model: expected a string, got 5"),
])
def test_log_of_wrong_types_is_one_error_and_leaves_no_mlflow_run(layout, capsys, change, message):
    tmp, uri = layout
    bad = run_dir(tmp / "bad", **change)
    code, out, err = cli(capsys, "log", run_dir(tmp / "good"), bad, "--tracking-uri", uri)
    assert code == 2 and err.startswith(f"error: {bad / 'metrics.json'}: cannot be logged: ") and message in err, err
    assert out == "" and not (tmp / "store" / "m.db").exists()  # the good directory was not logged either
    assert everything_under(tmp / "outside") == []


def test_log_refuses_a_run_directory_whose_files_are_not_of_one_run(layout, capsys):
    """A metrics.json copied from another run (or a config.json edited after training) would log
    one run's scores under another's spec: the recorded spec hashes must be config.json's."""
    from multigrain.platform.specs import spec_hash

    tmp, uri = layout
    other = {"task": "ner", "dataset": "resume", "seed": 8}
    copied = run_dir(tmp / "copied", spec_hash=spec_hash(other))
    renamed = run_dir(tmp / "renamed")
    (renamed / "spec_hash").write_text(spec_hash(other), encoding="utf-8")
    own = spec_hash({"task": "ner", "dataset": "resume", "seed": 7})
    for folder, name in ((copied, "metrics.json"), (renamed, "spec_hash")):
        code, out, err = cli(capsys, "log", run_dir(tmp / "good"), folder, "--tracking-uri", uri)
        assert code == 2 and out == "" and err.strip() == (
            f"error: {folder}: cannot be logged: {name} records spec hash {spec_hash(other)[:12]}, but config.json "
            f"hashes to {own[:12]}: the files are not of one run (copied from another, or edited)")
    assert not (tmp / "store" / "m.db").exists()  # the good directory was not logged either


def test_log_failing_after_the_run_is_created_ends_it_failed(layout, capsys, monkeypatch):
    from multigrain.platform.tracking import RunLogger

    tmp, uri = layout

    def broken_finish(self, result, run_dir):
        raise RuntimeError("the disk went away")

    real_finish = RunLogger.finish
    monkeypatch.setattr(RunLogger, "finish", broken_finish)
    with pytest.raises(RuntimeError, match="the disk went away"):
        cli(capsys, "log", run_dir(tmp / "run"), "--tracking-uri", uri)
    assert statuses(uri) == ["FAILED"]
    monkeypatch.setattr(RunLogger, "finish", real_finish)
    code, out, _ = cli(capsys, "log", tmp / "run", "--tracking-uri", uri)
    assert code == 0 and f"{tmp / 'run'}: logged as MLflow run" in out
    assert statuses(uri) == ["FAILED", "FINISHED"]


# 4 ------------------------------------------------------------------ tracking URIs that are no store
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_tracking_uri_that_is_no_store_fails_within_seconds(layout):
    tmp, _ = layout
    (tmp / "folder.db").mkdir()
    (tmp / "notes.txt").write_text("some notes\n" * 50, encoding="utf-8")
    port = closed_port()
    cases = [("foo://bar", "unknown scheme 'foo'"),
             (f"sqlite:///{tmp / 'folder.db'}", f"{tmp / 'folder.db'} is a folder, not a SQLite database file"),
             (f"sqlite:///{tmp / 'notes.txt'}", f"{tmp / 'notes.txt'} is not a SQLite database"),
             (f"http://127.0.0.1:{port}", f"nothing answers at 127.0.0.1:{port}")]
    for uri, why in cases:
        for env in ({}, {"MLFLOW_TRACKING_URI": uri}):
            started = time.monotonic()
            args = ("leaderboard", "--all") if env else ("leaderboard", "--all", "--tracking-uri", uri)
            out = run_cli(*args, cwd=tmp, env=env, timeout=120)
            took = time.monotonic() - started
            assert out.returncode == 2 and out.stderr.startswith(f"error: tracking URI {uri}: {why}"), out.stderr
            assert len(out.stderr.strip().splitlines()) == 1 and took < 15, (uri, took)
    assert (tmp / "notes.txt").read_text(encoding="utf-8") == "some notes\n" * 50


def test_a_file_store_or_a_database_without_its_driver_is_one_line_not_mlflows_traceback(layout, capsys,
                                                                                        monkeypatch):
    tmp, _ = layout
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    (tmp / "fs").mkdir()
    (tmp / "sqlite.db").write_bytes(b"")
    refused = "a file store (a folder), which MLflow 3.17 keeps in maintenance mode and refuses: use sqlite:///PATH"
    cases = [(f"file://{tmp / 'fs'}", refused), (str(tmp / "fs"), refused),
             (str(tmp / "sqlite.db"), f"{tmp / 'sqlite.db'} is a file; a file store is a folder (a SQLite store is "
                                      f"sqlite:///{tmp / 'sqlite.db'})"),
             ("postgresql+nosuchdriver://u@127.0.0.1/db", "not a database URI SQLAlchemy knows (")]
    import importlib.util

    if importlib.util.find_spec("pymysql") is None:
        cases.append(("mysql+pymysql://u@127.0.0.1/db", "its database driver 'pymysql' is not installed here (pip "
                                                         "install it, or name an installed one: mysql+DRIVER://...)"))
    for uri, why in cases:
        code, out, err = cli(capsys, "leaderboard", "--all", "--tracking-uri", uri)
        assert code == 2 and out == "" and err.startswith(f"error: tracking URI {uri}: {why}"), err
        assert len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in (tmp / "fs").iterdir()) == []  # nothing made in the folder
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the user's way out, as MLflow's message gives it
    assert cli(capsys, "leaderboard", "--all", "--tracking-uri", str(tmp / "fs"))[0] == 0


def test_train_checks_the_store_before_the_first_batch(layout, capsys, monkeypatch):
    tmp, _ = layout
    train = copy_sentences(DATA / "resume_ner" / "dev.char.bmes", tmp / "train.bmes", 8)
    (tmp / "spec.json").write_text(json.dumps(tiny_spec(bilstm_tagger(), {"type": "resume_ner"}, train, train,
                                                        task="ner", dataset="resume")), encoding="utf-8")
    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"):
        monkeypatch.setenv(name, "0")  # recorded, so that the test's end restores the variable (or its absence)
        monkeypatch.delenv(name)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")  # the user's choice is kept
    uri = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    code, out, err = cli(capsys, "train", tmp / "spec.json", "-s", tmp / "run", "--tracking-uri", uri)
    assert code == 2 and err.strip() == f"error: tracking URI {uri}: nothing answers at {uri[7:]} (Connection refused)"
    assert time.monotonic() - started < 15 and "epoch" not in out and not (tmp / "run").exists()
    import os

    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2" and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"


# 5 ------------------------------------------------------------------ a file that is not SQLite
@pytest.mark.parametrize("content", [b"x", b"SQLite format 2\x00" + b"\x00" * 100, "名单\n".encode() * 300])
def test_a_file_that_is_not_a_sqlite_database_is_never_overwritten(layout, capsys, monkeypatch, content):
    tmp, _ = layout
    precious = tmp / "store" / "precious.db"
    precious.write_bytes(content)
    uri = f"sqlite:///{precious}"
    good = board_file(tmp / "good.json", [row()])
    code, _, err = cli(capsys, "leaderboard", "--import", good, "--tracking-uri", uri)
    assert code == 2 and err.strip().startswith(f"error: tracking URI {uri}: {precious} is not a SQLite database")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert cli(capsys, "log", run_dir(tmp / "run"))[0] == 2
    assert cli(capsys, "leaderboard", "--all")[0] == 2
    assert precious.read_bytes() == content and sorted(p.name for p in precious.parent.iterdir()) == ["precious.db"]


def test_an_empty_file_is_a_new_store_as_sqlite_takes_it(layout, capsys):
    """SQLite (and so MLflow) opens a 0-byte file as an empty database; multigrain builds the store
    aside and moves it there, as for a missing file."""
    tmp, _ = layout
    empty = tmp / "store" / "empty.db"
    empty.write_bytes(b"")
    uri = f"sqlite:///{empty}"
    code, out, _ = cli(capsys, "leaderboard", "--all", "--tracking-uri", uri)  # read-only: no store yet
    assert code == 0 and "no finished runs" in out and empty.read_bytes() == b""
    code, _, err = cli(capsys, "leaderboard", "--import", board_file(tmp / "one.json", [row()]), "--tracking-uri", uri)
    assert code == 0 and "imported 1 runs" in err and empty.read_bytes()[:16] == SQLITE_HEADER
    assert statuses(uri) == ["FINISHED"]


# 6 ------------------------------------------------------------------ a metric no run has
def test_a_ranking_metric_no_run_has_is_an_error_naming_those_there(layout, capsys):
    tmp, uri = layout
    board = board_file(tmp / "b.json", [row("a"), row("b", metrics={"test_f1": 0.7, "test_precision": 0.6})])
    assert cli(capsys, "leaderboard", "--import", board, "--tracking-uri", uri)[0] == 0
    code, out, err = cli(capsys, "leaderboard", "--all", "--metric", "zzz", "--tracking-uri", uri)
    assert code == 2 and out == "" and err.strip() == (
        "error: --metric zzz: no finished leaderboard run of the store has this metric; their metrics: test_f1, "
        "test_precision, validation_f1")
    code, _, err = cli(capsys, "leaderboard", "ner/resume", "--metric", "test_f", "--tracking-uri", uri)
    assert code == 2 and "run of ner/resume has this metric (did you mean 'test_f1'?)" in err
    code, out, _ = cli(capsys, "leaderboard", "--all", "--metric", "test_precision", "--json", "--tracking-uri", uri)
    assert code == 0 and [(r["metric"], r["value"]) for r in json.loads(out)] == [("test_precision", 0.6)]


# 7 ------------------------------------------------------------------ export on a full disk
def test_export_on_a_full_disk_leaves_nothing_and_is_one_error(layout, capsys, monkeypatch):
    import os

    from multigrain.platform import portable

    tmp, uri = layout
    assert cli(capsys, "leaderboard", "--import", board_file(tmp / "b.json", [row()]), "--tracking-uri", uri)[0] == 0
    out_dir = tmp / "exports"
    out_dir.mkdir()
    (out_dir / "old.json").write_text("the previous export\n", encoding="utf-8")
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()
            return False

        def write(self, text):
            self.f.write(text[: len(text) // 2])  # half of it reached the disk
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(portable.os, "fdopen", lambda fd, *a, **k: Full(real_fdopen(fd, *a, **k)))
    for target in ("new.json", "old.json"):
        code, _, err = cli(capsys, "leaderboard", "--all", "--export", out_dir / target, "--tracking-uri", uri)
        assert code == 2 and err.strip() == (f"error: {out_dir / target}: cannot be written (No space left on "
                                             f"device); nothing was written")
    assert everything_under(out_dir) == ["old.json"]
    assert (out_dir / "old.json").read_text(encoding="utf-8") == "the previous export\n"


# 8 ------------------------------------------------------------------ spec keys past MLflow's 250 characters
def test_spec_keys_sharing_their_first_250_characters_log_as_distinct_params(layout, capsys):
    """MLflow takes 250 characters of a param key; a cut alone made two such keys one param ("Duplicate
    parameter keys", exit 1, a FAILED run): a longer key is its first 241 characters, '-' and 8 hex of its sha256."""
    import hashlib

    from mlflow.tracking import MlflowClient

    tmp, uri = layout
    long_keys = {"x" * 250: {"a": 1, "b": 2}, "y" * 250 + "1": "one", "y" * 250 + "2": "two"}
    folder = run_dir(tmp / "long", config={"task": "ner", "seed": 7, **long_keys})
    code, out, err = cli(capsys, "log", folder, "--tracking-uri", uri)
    assert code == 0 and f"{folder}: logged as MLflow run" in out, err
    (run,) = mlflow_runs(uri)
    assert run.info.status == "FINISHED"

    def cut(key):
        return key[:241] + "-" + hashlib.sha256(key.encode()).hexdigest()[:8]

    params = MlflowClient(uri).get_run(run.info.run_id).data.params
    assert params == {"task": "ner", "seed": "7", cut("x" * 250 + ".a"): "1", cut("x" * 250 + ".b"): "2",
                      cut("y" * 250 + "1"): "one", cut("y" * 250 + "2"): "two"}
    assert {len(k) for k in params if k not in ("task", "seed")} == {250}


def test_spec_keys_that_would_still_be_one_param_are_one_error_and_leave_no_run(layout, capsys):
    from multigrain.platform.errors import ConfigurationError
    from multigrain.platform.tracking import RunLogger, param_key

    tmp, uri = layout
    long = "z" * 300
    spec = {"task": "ner", "seed": 7, long: 1, param_key(long): 2}  # a key spelled as the other's param key
    good, bad = run_dir(tmp / "good"), run_dir(tmp / "bad", config=spec)
    code, out, err = cli(capsys, "log", good, bad, "--tracking-uri", uri)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"error: {bad / 'config.json'}: cannot be logged: '{'z' * 40}'...'{'z' * 30}' (300 "
                          f"characters) and '{'z' * 40}'...'{param_key(long)[-30:]}' (250 characters): both log as "
                          f"the MLflow param "), err
    assert not (tmp / "store" / "m.db").exists()  # refused before the store is opened: the good one waits too
    ident = {"task": "ner", "dataset": "resume", "model": "tagger", "encoder": "bilstm"}
    with pytest.raises(ConfigurationError, match="both log as the MLflow param"):  # training's logger: no run
        RunLogger(uri).start(spec, ident, HASH, str(bad))
    assert mlflow_runs(uri) == []


# 9 ------------------------------------------------------------------ extreme but finite numbers in curves
EXTREME = [{"epoch": 1, "train_loss": 1e308, "validation_f1": -1e308},
           {"epoch": 2, "train_loss": -1e308, "validation_f1": 1.7e308}]


def test_extreme_finite_curve_values_are_drawn_in_log_import_and_compare(layout, capsys):
    """MLflow stores ±1e308; matplotlib's autoscale overflowed on them (exit 1, a FAILED run). The
    plot draws values beyond ±1e300 at ±1e300 and says so; the store keeps the values as they are."""
    from mlflow.tracking import MlflowClient

    from multigrain.platform.artifacts import drawable

    assert drawable([[1, 1e308], [2, -1e308], [3, 0.5], [4, math.inf]]) == (
        [1.0, 2.0, 3.0, 4.0], [1e300, -1e300, 0.5, math.inf], True)
    assert drawable([[1, 1e300], [2, math.nan]])[2] is False
    tmp, uri = layout
    folder = run_dir(tmp / "big", history=EXTREME)
    code, out, err = cli(capsys, "log", folder, "--tracking-uri", uri)
    assert code == 0 and f"{folder}: logged as MLflow run" in out, err
    board = board_file(tmp / "big.json", [row("huge", history={"train_loss": [[1, 1e308], [2, -1e308]],
                                                               "validation_f1": [[1, 0.5], [2, 1.7e308]]})])
    code, _, err = cli(capsys, "leaderboard", "--import", board, "--tracking-uri", uri)
    assert code == 0 and "imported 1 runs (0 already in the store)" in err, err
    runs = mlflow_runs(uri)
    assert statuses(uri) == ["FINISHED", "FINISHED"]
    client = MlflowClient(uri)
    for run in runs:
        assert [m.value for m in client.get_metric_history(run.info.run_id, "train_loss")] == [1e308, -1e308]
        assert "learning_curves.png" in [a.path for a in client.list_artifacts(run.info.run_id)]
    plot = tmp / "both.png"
    code, out, err = cli(capsys, "compare", *(r.info.run_id for r in runs), "--plot", plot, "--tracking-uri", uri)
    assert code == 0 and f"learning curves: {plot}" in out, err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp.glob("both.png*")) == ["both.png"]  # no temporary file left beside it


def test_a_confusion_count_past_int64_is_drawn(layout, capsys):
    tmp, uri = layout
    folder = run_dir(tmp / "run", test_confusion={"labels": ["a", "b"], "matrix": [[10 ** 300, 0], [0, 1]]})
    code, out, err = cli(capsys, "log", folder, "--tracking-uri", uri)
    assert code == 0 and f"{folder}: logged as MLflow run" in out, err
    assert statuses(uri) == ["FINISHED"]
