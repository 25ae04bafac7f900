"""MLflow's environment variables checked before MLflow is used: MLflow parses most of them only
when it reads them, some at import, others (``MLFLOW_ENABLE_ASYNC_LOGGING``) at the first
``log_batch``, i.e. after a training's first epoch; a value it cannot parse was a ``ValueError``
traceback there, an MLflow run left FAILED and a run directory without ``metrics.json``. Here
every ``MLFLOW_*`` variable that is set and that MLflow defines with a type is parsed as MLflow
parses it, and the first it refuses is one ``ConfigurationError`` naming the variable, its value
and what MLflow takes.

MLflow's own definitions (``mlflow/environment_variables.py``: the names, types and parsing of
the installed version) are loaded from their file alone, without importing ``mlflow``: the import
is slow, and it fails itself on a bad ``MLFLOW_CONFIGURE_LOGGING``."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Optional

from multigrain.platform.errors import ConfigurationError

#: MLflow's definitions module, loaded once (None: MLflow is not installed, or the file is not there)
_LOADED: dict[str, Optional[ModuleType]] = {}


def _definitions() -> Optional[ModuleType]:
    """``mlflow/environment_variables.py`` of the installed MLflow, loaded alone (it imports only the
    standard library) under a private name; None where it cannot be found or loaded."""
    if "module" not in _LOADED:
        module = None
        try:
            found = importlib.util.find_spec("mlflow")  # a top-level name: finds, imports nothing
            folders = list(found.submodule_search_locations or []) if found else []
            path = next((Path(f) / "environment_variables.py" for f in folders
                         if (Path(f) / "environment_variables.py").is_file()), None)
            if path is not None:
                spec = importlib.util.spec_from_file_location("_multigrain_mlflow_environment_variables", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
        except Exception:  # another layout of MLflow: nothing is checked, MLflow reports its own errors
            module = None
        _LOADED["module"] = module
    return _LOADED["module"]


def _accepted(variable) -> str:
    """What MLflow takes for ``variable``, in words."""
    kind = getattr(variable, "type", None)
    if kind is bool:
        return "true, false, 1 or 0 (any case)"
    if kind is int:
        return "a whole number"
    if kind is float:
        return "a number"
    return f"a value {getattr(kind, '__name__', kind)} reads"


def mlflow_env_problem(environ=None) -> Optional[str]:
    """Why an ``MLFLOW_*`` variable of ``environ`` (default ``os.environ``) is one MLflow cannot
    parse, naming it, its value and what MLflow takes; None when every set one parses (or MLflow's
    definitions cannot be found)."""
    module = _definitions()
    base = getattr(module, "_EnvironmentVariable", None)
    if base is None:
        return None
    environ = os.environ if environ is None else environ
    for variable in vars(module).values():
        name = getattr(variable, "name", None)
        if not isinstance(variable, base) or name not in environ:
            continue
        try:
            if variable.type is bool:  # MLflow's boolean parsing, without its deprecation warnings
                ok = str(environ[name]).lower() in ("true", "false", "1", "0")
            else:
                variable.type(environ[name])
                ok = True
        except Exception:
            ok = False
        if not ok:
            return (f"environment variable {name}={environ[name]!r}: MLflow takes {_accepted(variable)}; "
                    f"change it or unset it")
    return None


def check_mlflow_env() -> None:
    """Raise ``mlflow_env_problem``'s line as a ConfigurationError (before MLflow is imported or used)."""
    why = mlflow_env_problem()
    if why:
        raise ConfigurationError(why)
