"""Opening the tracking store: checked first (``store_checks``), a SQLite store created once
under a lock and never over a file that is not one; experiments named ``<task>/<dataset>``
(``store_names``) with their artifacts inside the store's folder, and every artifact checked to
land there. ``tracking`` (runs, leaderboards) builds on this."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.store_checks import check_store, is_new_sqlite, sqlite_problem
from multigrain.platform.store_checks import sqlite_file as sqlite_path  # noqa: F401 (tracking, ui)
from multigrain.platform.store_names import experiment_problem, inside


def open_store(uri: str, create: bool = True):
    """A client of the store at ``uri``, checked first (``store_checks.check_store``: a wrong URI
    is one error within seconds). A SQLite store is created (tables and migrations) once, under a
    file lock beside it, before any writer uses it: trainings started together on a fresh store do
    not race to create it. Its folder must exist; a file there that is not a SQLite database is an
    error and never written over; with ``create`` false (read-only commands) a missing (or empty)
    store is None and nothing is created. A reader that may not write the lock file (a store it can
    only read) reads without it, making nothing (``_open_lock``)."""
    check_store(uri)  # before MLflow is even imported
    import fcntl

    import mlflow
    from mlflow.tracking import MlflowClient

    db = sqlite_path(uri)
    if db is not None and not create and is_new_sqlite(db):
        return None
    mlflow.set_tracking_uri(uri)
    if db is None:
        return MlflowClient(tracking_uri=uri)
    lock = _open_lock(uri, db, create)
    if lock is None:
        return _read_only_client(uri)
    with lock:
        if not lock.writable():  # it waits for a writer making or migrating the store, and makes nothing itself
            fcntl.flock(lock, fcntl.LOCK_SH)
            return _read_only_client(uri)
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        why = sqlite_problem(db)  # again, under the lock: the file may have changed since
        if why:
            raise ConfigurationError(f"tracking URI {uri}: {why}")
        if is_new_sqlite(db):  # built aside and renamed: a kill during the migrations leaves no half store
            fresh = db.with_name(db.name + ".creating")
            fresh.unlink(missing_ok=True)
            MlflowClient(tracking_uri=f"sqlite:///{fresh}").search_experiments(max_results=1)
            _dispose_engine(f"sqlite:///{fresh}")
            if sqlite_problem(db) is None and is_new_sqlite(db):  # only nothing, or an empty file, is replaced
                os.replace(fresh, db)
            else:
                fresh.unlink(missing_ok=True)
                raise ConfigurationError(f"tracking URI {uri}: {db} changed while the store was made; try again")
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)  # migrates an older store now, inside the lock
    return client


def _open_lock(uri: str, db: Path, create: bool):
    """The lock file beside the SQLite store ``db``, opened for writing (made when missing). A reader
    (``create`` false) that may not write it gets it opened for reading (a shared lock: it waits
    for a writer holding the exclusive one), or None where there is none and it may not make one:
    the store exists (a new one was None before), and a process that cannot write it makes or
    migrates nothing. A writer that cannot open it is one ConfigurationError naming it."""
    path = db.with_name(db.name + ".lock")
    try:
        return open(path, "a")
    except OSError as e:
        if create:
            raise ConfigurationError(f"tracking URI {uri}: its lock file {path} cannot be made or written "
                                     f"({e.strerror or e})") from None
    try:
        return open(path, "r")
    except OSError:
        return None


def _read_only_client(uri: str):
    """A client of an existing SQLite store this process may not write: read now, so that a store
    it could only use by writing (tables to make, an older schema) is one ConfigurationError."""
    import logging

    from mlflow.tracking import MlflowClient

    said = logging.getLogger("mlflow.store.db.utils")  # "Creating initial MLflow database tables...": it cannot
    level = said.level
    said.setLevel(logging.WARNING)
    try:
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
    except Exception as e:  # MLflow's, SQLAlchemy's or SQLite's: the store needs a write this process cannot do
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ConfigurationError(f"tracking URI {uri}: the store cannot be read without writing to it, and this "
                                 f"process may not write it ({first})") from None
    finally:
        said.setLevel(level)
    return client


@contextmanager
def adding_runs(uri: str) -> Iterator[None]:
    """Held while a command looks for a run in the store and adds it when it is not there (``log``,
    ``leaderboard --import``): two such commands at once on one SQLite store both found nothing and
    both added it, a duplicate row. A file lock beside the store (not ``open_store``'s, which the
    adding takes); nothing for other stores."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    import fcntl

    from multigrain.platform.weights import open_lock

    check_store(uri, write=True)  # nothing is made beside a file that is no store, or in a store it cannot write

    with open_lock(db.with_name(db.name + ".adding.lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def artifact_root(uri: str) -> Optional[Path]:
    """The folder every artifact of a SQLite store lies in (``<its folder>/mlruns``); None for other
    stores (their server or database decides)."""
    db = sqlite_path(uri)
    return db.parent.resolve() / "mlruns" if db is not None else None


def _dispose_engine(uri: str) -> None:
    """Close the connections MLflow keeps to the store at ``uri`` (before its file is renamed)."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        engine = SqlAlchemyStore._engine_map.pop(uri, None)
    except (ImportError, AttributeError):
        return
    if engine is not None:
        engine.dispose()


#: experiment tags: the MLflow UI opens these experiments on their runs (model training), not on traces
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}


def experiment_id(client, name: str) -> str:
    """The experiment ``name`` (``<task>/<dataset>``, each a safe segment: ``store_names``), created
    when missing. A SQLite store's artifacts go beside it (``<its folder>/mlruns/<name>``),
    wherever the process runs."""
    why = experiment_problem(name)
    if why:
        raise ConfigurationError(f"experiment name {why}")
    exp = existing_experiment(client, name)
    if exp is not None:
        return exp.experiment_id
    root = artifact_root(client.tracking_uri)
    where = str(root / name) if root is not None else None
    if where is not None and not inside(where, root):
        raise ConfigurationError(f"experiment {name!r}: its artifacts would go to {Path(where).resolve()}, outside "
                                 f"the store's artifact folder {root}")
    try:
        return client.create_experiment(name, artifact_location=where, tags=EXPERIMENT_TAGS)
    except Exception:  # created concurrently
        return client.get_experiment_by_name(name).experiment_id


def existing_experiment(client, name: str):
    """The store's experiment ``name``, or None; refused when its artifacts lie outside the store's
    artifact folder (a store moved or copied from elsewhere: its runs' files would be written there)."""
    exp = client.get_experiment_by_name(name)
    root = artifact_root(client.tracking_uri)
    folder = _local_path(exp.artifact_location) if exp is not None and root is not None else None
    if folder is not None and not inside(folder, root):
        raise ConfigurationError(
            f"experiment {name!r} keeps its artifacts at {exp.artifact_location}, outside the store's artifact "
            f"folder {root}: the store was moved or copied from elsewhere, and its runs' files would be written "
            f"there. Use a new store (--tracking-uri sqlite:///NEW.db; leaderboard --export and --import carry "
            f"the rows over)")
    return exp


def _local_path(location: str) -> Optional[Path]:
    """The folder of an artifact location (a path or a ``file:`` URI); None for another scheme
    (a server's)."""
    import urllib.parse

    parts = urllib.parse.urlparse(location)
    if parts.scheme == "file":
        return Path(urllib.parse.unquote(parts.path))
    return Path(location) if parts.scheme == "" or len(parts.scheme) == 1 else None  # one letter: a drive


def log_artifact(client, run_id: str, local_path: str) -> None:
    """``client.log_artifact``, refused (ConfigurationError) when the run's artifacts would land
    outside the store's artifact folder (an experiment whose location leaves the store)."""
    root = artifact_root(client.tracking_uri)
    folder = _local_path(client.get_run(run_id).info.artifact_uri) if root is not None else None
    target = folder / Path(local_path).name if folder is not None else None
    if target is not None and not inside(target, root):
        raise ConfigurationError(f"run {run_id}: its artifact {target.name} would be written to {target.resolve()}, "
                                 f"outside the store's artifact folder {root}")
    client.log_artifact(run_id, local_path)
