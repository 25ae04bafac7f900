"""Plugin modules: imported only at the user's word, named (never imported) by a run.

``--include-package M`` imports a local module that registers components (``include``); so does
an installed ``multigrain.plugins`` entry point (``registry.load_plugins``). Nothing else imports
plugin code: a run directory is data. It NAMES the plugin modules its spec needs in
``plugins.json``: every module of an ``--include-package`` package or a ``multigrain.plugins``
entry point that defines a component whose registered name the spec uses as a ``type``, with the
sha256 of its source file and the package to import for it::

    {"modules": [{"module": "my_readers", "package": "my_readers", "search_dir": "/home/me/work",
                  "file": "/home/me/work/my_readers.py", "sha256": "...",
                  "components": ["reader my_jsonl"]}]}

Every process that opens the run (``runs.Run``: ``evaluate``, ``predict``, ``serve``,
``evaluate-all``, sweep trials, ``train --resume``) checks it first (``check_recorded``), before a
model is built or weights are loaded: a recorded module that is not imported in this process (by
the user's ``--include-package`` or an installed entry point) is one ConfigurationError naming it,
the run directory and its components and asking for ``--include-package``; a module whose source
differs from the recorded sha256 is a ConfigurationError naming it too. For the user's own
``--include-package`` of a top-level module the CLI compares the source before importing it
(``check_sources_before_import``). ``search_dir`` and ``file`` are information only.

Processes the platform starts for the user (sweep trials, Ray Train workers, Serve replicas,
``evaluate-all`` actors) get the user's list, ``travelling()``: the names given to ``include`` in
the driver and the folders its flag found them in; they import it (``include_travelled``) before
they open a run. Never the list of a run directory.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Iterable, Optional

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.weights import write_atomically

PLUGINS_FILE = "plugins.json"
#: a ``plugins.json`` larger than this is damaged (a real one is a few hundred bytes per module)
MAX_RECORD_BYTES = 1 << 20
#: components of a module named in an error, at most
SHOWN_COMPONENTS = 10

#: package name given to ``include`` -> the folder it was imported from (None: from sys.path)
INCLUDED: dict[str, Optional[str]] = {}

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


def include(name: str, search_dir: Optional[str] = None) -> None:
    """``--include-package``: import module or package ``name`` (from ``search_dir`` when it holds
    it, else from ``sys.path``; see ``registry.import_package``) and remember where it came from."""
    from multigrain.platform.registry import import_package, plugin_output_to_stderr

    try:
        with plugin_output_to_stderr():
            import_package(name, search_dir)
    except ConfigurationError:
        raise
    except (Exception, SystemExit) as e:  # the module itself failed: a syntax error, an exception, sys.exit()
        raise ConfigurationError(f"--include-package {name}: importing it failed: {type(e).__name__}: {e}") from e
    origin = getattr(sys.modules.get(name), "__file__", None)
    local = None
    if search_dir and origin:
        folder = Path(search_dir).resolve()
        if folder in Path(origin).resolve().parents:
            local = str(folder)
    INCLUDED[name] = local


def travelling(names: Iterable[str] = ()) -> list[list]:
    """The user's plugin list for a process the platform starts: ``[name, folder]`` for every
    package ``include``d here (folder None: found on ``sys.path``), and for each of ``names`` not
    included here the working directory (where ``--include-package`` looks)."""
    out = [[name, folder] for name, folder in INCLUDED.items()]
    out += [[name, os.getcwd()] for name in dict.fromkeys(names) if name not in INCLUDED]
    return out


def include_travelled(entries: Iterable) -> None:
    """In a process the platform started: import the user's list (``travelling``), each module
    from the folder the driver found it in."""
    for name, folder in entries or ():
        include(name, folder)


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


def suspects(spec: dict) -> str:
    """``; its components from plugins: encoder my_lstm (my_encoders)`` for an error that the
    spec's plugin code may cause; empty when the spec needs none."""
    named = [f"{c} ({m['module']})" for m in needed_modules(spec) for c in m["components"]]
    return f"; its components from plugins: {', '.join(named)}" if named else ""


def record(run_dir: Path, spec: dict) -> list[dict]:
    """Write ``plugins.json`` (atomically) when ``spec`` needs plugin modules; returns them."""
    modules = needed_modules(spec)
    if modules:
        path = Path(run_dir) / PLUGINS_FILE
        text = json.dumps({"modules": modules}, indent=2, ensure_ascii=False)
        write_atomically(path, lambda f: f.write(text), binary=False)
    return modules


def _shown(text) -> str:
    """A recorded string as it may be printed: as it is when printable, else its repr."""
    text = str(text)
    return text if text.isprintable() else repr(text)


def recorded(run_dir: Path) -> list[dict]:
    """The modules ``plugins.json`` of ``run_dir`` names (none when there is no such file); the
    file is only read, and an entry that is no plain module record is a ConfigurationError."""
    path = Path(run_dir) / PLUGINS_FILE
    if not path.is_file():
        return []
    try:
        from multigrain.platform.jsonio import loads

        if (size := path.stat().st_size) > MAX_RECORD_BYTES:
            raise ValueError(f"{size:,} bytes, more than a plugin record's {MAX_RECORD_BYTES:,}")

        modules = loads(path.read_text(encoding="utf-8"))["modules"]  # deep nesting: an error, no RecursionError
        if not isinstance(modules, list):
            raise ValueError("'modules' is not a list")
        for m in modules:
            if not (isinstance(m, dict) and isinstance(m.get("module"), str) and isinstance(m.get("package"), str)):
                raise ValueError("every entry needs a module and a package name")
            if not (_DOTTED.match(m["module"]) and _DOTTED.match(m["package"])):
                raise ValueError(f"{m['module']!r} (package {m['package']!r}) is no Python module name")
            if m.get("sha256") is not None and not (isinstance(m["sha256"], str) and _SHA256.match(m["sha256"])):
                raise ValueError(f"module {m['module']!r}: sha256 is not 64 hex digits")
            components = m.get("components", [])
            if not (isinstance(components, list) and all(isinstance(c, str) for c in components)):
                raise ValueError(f"module {m['module']!r}: components is not a list of names")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigurationError(f"{path}: damaged ({type(e).__name__}: {e})") from None
    return modules


def _described(entry: dict) -> str:
    parts = []
    if entry.get("components"):
        shown = [_shown(c)[:100] for c in entry["components"][:SHOWN_COMPONENTS]]
        more = len(entry["components"]) - len(shown)
        parts.append("providing " + ", ".join(shown) + (f" and {more:,} more" if more > 0 else ""))
    if entry.get("file"):
        parts.append(f"{PLUGINS_FILE} records it as {_shown(entry['file'])[:300]}")
    return f"{entry['module'][:200]!r}" + (f" ({'; '.join(parts)})" if parts else "")


def check_recorded(run_dir: Path) -> None:
    """Before a run is used: every plugin module ``run_dir`` records must already be imported in
    this process (by ``--include-package`` or an installed entry point, which are loaded now if
    they were not yet) with the source the run was trained with; nothing is imported for the
    run directory. Else one ConfigurationError naming the modules, the run and what to do."""
    modules = recorded(run_dir)
    if not modules:
        return
    if any(sys.modules.get(m["module"]) is None for m in modules):
        from multigrain.platform.registry import load_plugins

        load_plugins()  # installed entry points: imported by the first registry lookup anyway
    missing = [m for m in modules if sys.modules.get(m["module"]) is None]
    if missing:
        packages = list(dict.fromkeys(m["package"] for m in missing))
        flags = " ".join(f"--include-package {p}" for p in packages)
        what = "plugin module" if len(missing) == 1 else "plugin modules"
        raise ConfigurationError(
            f"{run_dir}: the run needs {what} {', '.join(_described(m) for m in missing)}, not imported in this "
            f"process; a run directory names its plugins but never imports them: if you trust the code, pass "
            f"{flags}")
    for entry in modules:
        path = getattr(sys.modules[entry["module"]], "__file__", None)
        if entry.get("sha256") and path and Path(path).is_file():
            _same_source(run_dir, entry, path)


def _same_source(run_dir: Path, entry: dict, path: str) -> None:
    now = source_hash(path)
    if now != entry["sha256"]:
        recorded_file = f" ({_shown(entry['file'])})" if entry.get("file") else ""
        raise ConfigurationError(
            f"{run_dir}: plugin module {entry['module']!r} ({path}) is not the source the run was trained with "
            f"(sha256 {entry['sha256'][:12]} in {PLUGINS_FILE}, {now[:12]} now); put back the source it was "
            f"trained with{recorded_file}, or train the run again")


def check_sources_before_import(names: Iterable[str], run_dirs: Iterable, search_dir: Optional[str]) -> None:
    """``--include-package`` of a top-level module for a command that opens ``run_dirs``: its
    source file (found as ``include`` would find it, without importing it) must have the sha256
    that each of those runs recorded for it, else a ConfigurationError before it is imported.
    Packages' submodules and damaged or absent records are left to ``check_recorded``. A module or
    package that would be imported from inside one of ``run_dirs`` is refused: run directories
    come from others too (their ``plugins.json`` says whatever its author wrote), and never supply
    code."""
    import importlib.util
    from importlib.machinery import PathFinder

    run_dirs = list(run_dirs)
    origins = {}
    for name in names:
        top = name.split(".")[0]
        if top in sys.modules:
            continue
        try:
            spec = (PathFinder.find_spec(top, [search_dir]) if search_dir else None) or importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        _not_from_run_dirs(name, [spec.origin or "", *(spec.submodule_search_locations or [])], run_dirs)
        if name == top and spec.origin and Path(spec.origin).is_file():
            origins[name] = spec.origin
    for run_dir in run_dirs:
        try:
            modules = recorded(Path(run_dir))
        except ConfigurationError:
            continue
        for entry in modules:
            if entry["module"] in origins and entry.get("sha256"):
                _same_source(Path(run_dir), entry, origins[entry["module"]])


def _not_from_run_dirs(name: str, places: list[str], run_dirs: list) -> None:
    """A ConfigurationError when one of ``places`` (a module's file, a package's folders) lies in
    one of ``run_dirs``."""
    for run_dir in run_dirs:
        folder = Path(run_dir).resolve()
        for place in places:
            if place and (folder == Path(place).resolve() or folder in Path(place).resolve().parents):
                raise ConfigurationError(
                    f"--include-package {name}: it would be imported from {place}, inside the run directory "
                    f"{run_dir} that this command opens; a run directory never supplies code: run the command "
                    f"from another folder, or keep the module outside the run")
