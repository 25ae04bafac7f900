"""The tracking store checked before anything uses it, so that a wrong ``--tracking-uri`` (or
``MLFLOW_TRACKING_URI``) is one line within seconds, before a training's first batch, instead of
minutes of MLflow's retries and a traceback:

- an unknown scheme;
- a SQLite store that is a folder, a file that is not a SQLite database (its first 16 bytes are
  not ``SQLite format 3\\0``: never written over; an empty file is a new store, as SQLite itself
  takes it), or whose folder is missing;
- an HTTP store where nothing answers (one TCP connection with a short timeout); MLflow's HTTP
  retries are also kept short in this process (``HTTP_DEFAULTS``) unless the user set them;
- a database URI whose driver is not installed (SQLAlchemy's dialect names it), or where nothing
  answers;
- a file store (a folder), which MLflow 3.17 refuses unless ``MLFLOW_ALLOW_FILE_STORE`` is true;
- an ``MLFLOW_*`` environment variable MLflow cannot parse (``mlflow_env``);
- for a command that writes (``write``): a SQLite store this process cannot write (its folder, the
  database, its lock file, its artifact folder), which MLflow found only at its first write, after
  a training's first epoch.

Imports no MLflow (SQLAlchemy, for a database URI only)."""
from __future__ import annotations

import os
import socket
import urllib.parse
from pathlib import Path
from typing import Optional

from multigrain.platform.errors import ConfigurationError

SQLITE_HEADER = b"SQLite format 3\x00"
#: the stores MLflow 3 opens (a database scheme may name its driver: ``postgresql+psycopg2``)
SCHEMES = ("sqlite", "http", "https", "file", "postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")
#: the port of a database URI that names none (SQLAlchemy's dialects' defaults)
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
#: seconds the HTTP check waits for a connection
CONNECT_TIMEOUT = 3.0
#: MLflow's HTTP client settings for our processes (its defaults retry for minutes: 7 retries,
#: backoff factor 2, 120 s timeout); a value the user set wins
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}


def scheme_of(uri: str) -> str:
    """The store kind of ``uri``: ``sqlite``, ``http``, ``file`` (a plain path too), ..."""
    scheme = urllib.parse.urlparse(uri).scheme.lower()
    if len(scheme) == 1 and scheme.isalpha():  # a Windows drive letter: a path
        return "file"
    return scheme.split("+", 1)[0] or "file"


def sqlite_file(uri: str) -> Optional[Path]:
    """The database file of a ``sqlite:///`` URI (None for other stores)."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def sqlite_problem(db: Path) -> Optional[str]:
    """Why the file ``db`` cannot be a SQLite store (None: a SQLite database, an empty file or none
    yet)."""
    try:
        if db.is_dir():
            return f"{db} is a folder, not a SQLite database file"
        if not db.exists():
            return None if db.parent.is_dir() else f"the folder {db.parent} does not exist"
        if not db.is_file():
            return f"{db} is not a regular file"
        with open(db, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        return f"{db} cannot be read ({e.strerror})"
    if head and head != SQLITE_HEADER:
        return (f"{db} is not a SQLite database (it does not start with 'SQLite format 3'); it is left "
                f"untouched: give the path of a SQLite store, or of a file that does not exist yet")
    return None


def is_new_sqlite(db: Path) -> bool:
    """No store in ``db`` yet: no file, or an empty one (SQLite takes an empty file as a new database)."""
    try:
        return not db.exists() or db.stat().st_size == 0
    except OSError:
        return False


def writable_problem(db: Path) -> Optional[str]:
    """Why this process cannot write the SQLite store ``db`` (None: it can). SQLite writes the
    database and its journal in its folder, ``store.open_store`` the lock file beside it, MLflow the
    runs' artifacts under ``mlruns/`` there. ``os.access`` sees permissions and a read-only file
    system; opening the lock file for writing, or where there is none yet making a probe file in the
    folder and removing it at once, sees the rest: a folder that takes no files whoever asks
    (``/proc``). Nothing is left behind: a training refused later leaves no lock beside no store."""
    folder, lock, artifacts = db.parent, db.with_name(db.name + ".lock"), db.parent / "mlruns"
    denied = "no write permission here, or a read-only file system"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} cannot be written ({denied}): the database, its journal and lock are made there"
    for path, what, mode in ((db, "the database", os.R_OK | os.W_OK), (lock, "its lock file", os.R_OK | os.W_OK),
                             (artifacts, "its artifact folder", os.W_OK | os.X_OK)):
        if os.path.lexists(path) and not os.access(path, mode):
            return f"{what} {path} cannot be written ({denied})"
    if artifacts.exists() and not artifacts.is_dir():
        return f"its artifact folder {artifacts} is not a folder"
    try:
        if os.path.lexists(lock):
            os.close(os.open(lock, os.O_RDWR | os.O_APPEND))
        else:
            import tempfile

            handle, probe = tempfile.mkstemp(prefix=".multigrain-probe-", dir=folder)
            os.close(handle)
            os.unlink(probe)
    except OSError as e:
        return f"no file can be made or written in its folder {folder} ({e.strerror or e})"
    return None


def http_problem(uri: str, timeout: float = CONNECT_TIMEOUT) -> Optional[str]:
    """Why nothing answers at the HTTP(S) store ``uri`` (None: a connection opened)."""
    parts = urllib.parse.urlparse(uri)
    host = parts.hostname
    if not host:
        return "no host in the URI (expected http://HOST:PORT)"
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError as e:
        return f"bad port ({e})"
    return connect_problem(host, port, timeout)


def database_problem(uri: str, timeout: float = CONNECT_TIMEOUT) -> Optional[str]:
    """Why the database store ``uri`` (``postgresql://``, ``mysql+DRIVER://``, ...) cannot be opened
    here: a driver that is not installed, no host, or nothing answering (None: a connection opened)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = make_url(uri)
        url.get_dialect().import_dbapi()
    except ModuleNotFoundError as e:
        return (f"its database driver {e.name!r} is not installed here (pip install it, or name an installed "
                f"one: {url.get_backend_name()}+DRIVER://...)")
    except (ArgumentError, NoSuchModuleError, ValueError) as e:
        return f"not a database URI SQLAlchemy knows ({e})"
    if not url.host:
        return f"no host in the URI (expected {url.get_backend_name()}://USER@HOST:PORT/DATABASE)"
    return connect_problem(url.host, url.port or DATABASE_PORTS.get(url.get_backend_name(), 0), timeout)


def connect_problem(host: str, port: int, timeout: float = CONNECT_TIMEOUT) -> Optional[str]:
    """Why no TCP connection opens to ``host:port`` within ``timeout`` seconds (None: one did)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as e:
        return f"the host {host} is not known ({e.strerror or e})"
    except socket.timeout:
        return f"nothing answered at {host}:{port} within {timeout:g} s"
    except OSError as e:
        return f"nothing answers at {host}:{port} ({e.strerror or e})"


#: the HTTP and database stores a connection was opened to in this process (each is tried once)
_REACHED: set[str] = set()


def check_store(uri: str, write: bool = False) -> None:
    """Raise one ConfigurationError naming ``uri`` and why it cannot be a tracking store, or (with
    ``write``: a training, ``log``, ``--import``) one this process cannot write; before it, one
    naming an MLflow environment variable MLflow cannot parse. Cheap: a few file system calls; an
    HTTP store is connected to once per process."""
    def fail(why: str):
        raise ConfigurationError(f"tracking URI {uri}: {why}")

    from multigrain.platform.mlflow_env import check_mlflow_env

    check_mlflow_env()

    if not isinstance(uri, str) or not uri.strip():
        fail("empty")
    try:
        urllib.parse.urlparse(uri).port  # a bracket left open, a port that is no number
    except ValueError as e:
        fail(f"cannot be read as a URI ({e})")
    scheme = scheme_of(uri)
    if scheme not in SCHEMES:
        fail(f"unknown scheme {scheme!r} (expected sqlite:///PATH, http(s)://HOST:PORT, a folder, or a database "
             f"URI: {', '.join(SCHEMES[4:])})")
    if scheme == "sqlite":
        db = sqlite_file(uri)
        if db is None or not str(db):
            fail("expected sqlite:///PATH (three slashes, then the database file)")
        why = sqlite_problem(db) or (writable_problem(db) if write else None)
        if why:
            fail(why)
    elif scheme in ("http", "https"):
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
        if uri not in _REACHED:
            why = http_problem(uri)
            if why:
                fail(why)
            _REACHED.add(uri)
    elif scheme in DATABASE_PORTS and uri not in _REACHED:
        why = database_problem(uri)
        if why:
            fail(why)
        _REACHED.add(uri)
    elif scheme == "file":
        folder = Path(urllib.parse.urlparse(uri).path if uri.lower().startswith("file:") else uri)
        if folder.exists() and not folder.is_dir():
            sqlite = "" if sqlite_problem(folder) else f" (a SQLite store is sqlite:///{folder})"
            fail(f"{folder} is a file; a file store is a folder{sqlite}")
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
            fail("a file store (a folder), which MLflow 3.17 keeps in maintenance mode and refuses: use "
                 "sqlite:///PATH (`mlflow migrate-filestore` moves an existing one there), or set "
                 "MLFLOW_ALLOW_FILE_STORE=true")
