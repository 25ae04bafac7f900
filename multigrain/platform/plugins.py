"""Plugin modules that travel with a run.

``--include-package M`` imports a local module that registers components (``include``). A run
directory records the plugin modules its spec needs in ``plugins.json``: every module of an
``--include-package`` package or a ``multigrain.plugins`` entry point that defines a component
whose registered name the spec uses as a ``type``, with the sha256 of its source file and the
package to import for it::

    {"modules": [{"module": "my_readers", "package": "my_readers", "search_dir": "/home/me/work",
                  "file": "/home/me/work/my_readers.py", "sha256": "...",
                  "components": ["reader my_jsonl"]}]}

Every process that opens the run (``runs.Run``: ``evaluate``, ``predict``, ``serve``, ``evaluate-all``,
sweep trials, Ray workers, ``train --resume``) imports them first (``import_recorded``), without the
flag: a module whose source changed since is a ``PluginChangedWarning`` naming it; one that can no
longer be imported is a ConfigurationError naming the module and the run directory.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Optional

from multigrain.platform.errors import ConfigurationError

PLUGINS_FILE = "plugins.json"

#: package name given to ``include`` -> the folder it was imported from (None: from sys.path)
INCLUDED: dict[str, Optional[str]] = {}


class PluginChangedWarning(UserWarning):
    """A plugin module's source differs from the one the run was trained with."""


def include(name: str, search_dir: Optional[str] = None) -> None:
    """``--include-package``: import module or package ``name`` (from ``search_dir`` when it holds
    it, else from ``sys.path``; see ``registry.import_package``) and remember where it came from."""
    from multigrain.platform.registry import import_package

    try:
        import_package(name, search_dir)
    except ConfigurationError:
        raise
    except Exception as e:  # the module itself failed: a syntax error, an exception at import
        raise ConfigurationError(f"--include-package {name}: importing it failed: {type(e).__name__}: {e}") from e
    origin = getattr(sys.modules.get(name), "__file__", None)
    local = None
    if search_dir and origin:
        folder = Path(search_dir).resolve()
        if folder in Path(origin).resolve().parents:
            local = str(folder)
    INCLUDED[name] = local


def source_hash(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def spec_type_names(spec) -> set[str]:
    """Every string under a ``type`` key anywhere in a resolved spec."""
    found: set[str] = set()
    todo = [spec]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if isinstance(node.get("type"), str):
                found.add(node["type"])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _package_of(module: str) -> Optional[tuple[str, Optional[str]]]:
    """(the package to import for ``module``, the folder it came from): the ``--include-package``
    name that covers it, else the entry point's module from ``sys.path``; None when ``module`` is
    no plugin (built in, or registered by code that is not a plugin, e.g. a test)."""
    from multigrain.platform.registry import LOADED_PLUGINS

    for package, folder in INCLUDED.items():
        if _within(module, package):
            return package, folder
    for plugin in LOADED_PLUGINS:
        entry_module = plugin.split(":")[0]
        if _within(module, entry_module):
            return entry_module, None
    return None


def needed_modules(spec: dict) -> list[dict]:
    """The plugin modules ``spec`` needs (see the module docstring), sorted by module name."""
    from multigrain.platform.registry import KINDS

    names = spec_type_names(spec)
    by_module: dict[str, list[str]] = {}
    for kind, base in KINDS.items():
        for name, entry in base.registry().items():
            if name in names and _package_of(entry.cls.__module__) is not None:
                by_module.setdefault(entry.cls.__module__, []).append(f"{kind} {name}")
    out = []
    for module in sorted(by_module):
        path = getattr(sys.modules.get(module), "__file__", None)
        package, folder = _package_of(module)
        out.append({"module": module, "package": package, "search_dir": folder,
                    "file": str(Path(path).resolve()) if path else None,
                    "sha256": source_hash(path) if path and Path(path).is_file() else None,
                    "components": sorted(by_module[module])})
    return out


def record(run_dir: Path, spec: dict) -> list[dict]:
    """Write ``plugins.json`` (atomically) when ``spec`` needs plugin modules; returns them."""
    modules = needed_modules(spec)
    if modules:
        path = Path(run_dir) / PLUGINS_FILE
        tmp = path.with_name(PLUGINS_FILE + ".tmp")
        tmp.write_text(json.dumps({"modules": modules}, indent=2, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    return modules


def recorded(run_dir: Path) -> list[dict]:
    """The modules ``plugins.json`` of ``run_dir`` lists (none when there is no such file)."""
    path = Path(run_dir) / PLUGINS_FILE
    if not path.is_file():
        return []
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))["modules"]
        if not all(isinstance(m, dict) and isinstance(m.get("module"), str) and isinstance(m.get("package"), str)
                   for m in modules):
            raise ValueError("every entry needs a module and a package name")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(f"{path}: damaged ({type(e).__name__}: {e})") from None
    return modules


def import_recorded(run_dir: Path) -> list[str]:
    """Import the plugin modules ``run_dir`` records; returns the packages imported now. A changed
    source is a ``PluginChangedWarning``; a module that cannot be imported a ConfigurationError."""
    modules = recorded(run_dir)
    imported = []
    for entry in modules:
        package, folder = entry["package"], entry.get("search_dir")
        if package in sys.modules:
            INCLUDED.setdefault(package, folder)
        else:
            where = folder if folder and Path(folder).is_dir() else os.getcwd()
            try:
                include(package, where)
            except ConfigurationError as e:
                cause = str(e).split(": ", 1)[-1]
                raise ConfigurationError(
                    f"{run_dir}: the run needs plugin module {package!r} ({PLUGINS_FILE}: it was "
                    f"{entry.get('file') or 'not a file'}, providing {', '.join(entry.get('components', []))}), "
                    f"which cannot be imported here: {cause}; put the module back (or on PYTHONPATH), "
                    f"or pass --include-package with the module that now registers those components") from None
            imported.append(package)
        _check_source(entry)
    return imported


def _check_source(entry: dict) -> None:
    module = sys.modules.get(entry["module"])
    path = getattr(module, "__file__", None)
    if module is None or not entry.get("sha256") or not path or not Path(path).is_file():
        return
    now = source_hash(path)
    if now != entry["sha256"]:
        warnings.warn(f"plugin module {entry['module']!r} ({path}) changed since the run was trained "
                      f"(sha256 {entry['sha256'][:12]} then, {now[:12]} now)", PluginChangedWarning, stacklevel=3)
