"""Named registries of components, one per kind, with lazily loaded plugins.

A *kind* is a base class declared with ``kind="..."``::

    class Encoder(Registrable, kind="encoder"): ...

    @Encoder.register("bilstm")
    class BiLstmEncoder(Encoder): ...

``Encoder.by_name("bilstm")`` returns the class. A name that is not found triggers, once,
the import of the built-in components and then of every ``multigrain.plugins`` entry point,
so nothing heavy is imported until a lookup needs it.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Callable, ClassVar, TypeVar

from multigrain.platform.errors import ConfigurationError

T = TypeVar("T", bound=type)

PLUGIN_GROUP = "multigrain.plugins"
BUILTIN_MODULES = ("multigrain.platform.optim",)
BUILTIN_PACKAGE = "multigrain.components"

#: kind name -> base class
KINDS: dict[str, type["Registrable"]] = {}


@dataclass(frozen=True)
class Entry:
    name: str
    cls: type
    where: str  # "module:Qualname (file:line)"


def _where(cls: type) -> str:
    try:
        line = inspect.getsourcelines(cls)[1]
        path = inspect.getsourcefile(cls)
        return f"{cls.__module__}.{cls.__qualname__} ({path}:{line})"
    except (OSError, TypeError):
        return f"{cls.__module__}.{cls.__qualname__}"


def _replaces_builtin(old: type, new: type) -> bool:
    """Whether ``new``, from outside multigrain, would take the name of ``old``, a built-in."""
    return old.__module__.startswith("multigrain.") and not new.__module__.startswith("multigrain.")


class Registrable:
    """Base of every registrable kind. Subclass with ``kind=`` to open a new registry."""

    kind: ClassVar[str | None] = None
    default_implementation: ClassVar[str | None] = None
    #: constructor parameters (each with a default) naming files that only set first weights, left
    #: out when a run directory's model is built to load its own checkpoint (``config.Lazy.construct``)
    weight_sources: ClassVar[tuple[str, ...]] = ()
    #: constructor parameters naming files read when the component is built (a word list, say):
    #: ``validate`` checks that each is a file, as it checks ``weight_sources``
    input_files: ClassVar[tuple[str, ...]] = ()
    _entries: ClassVar[dict[str, Entry]]

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if kind is not None:
            if kind in KINDS:
                raise ConfigurationError(f"registry kind {kind!r} declared twice: {KINDS[kind]} and {cls}")
            cls.kind = kind
            cls._entries = {}
            KINDS[kind] = cls

    @classmethod
    def register(cls, name: str, exist_ok: bool = False) -> Callable[[T], T]:
        if cls.kind is None:
            raise ConfigurationError(f"{cls.__name__} is not a registry kind")
        entries = KINDS[cls.kind]._entries

        def add(subclass: T) -> T:
            if not isinstance(subclass, type):
                raise ConfigurationError(f"{cls.kind} {name!r}: {cls.__name__}.register is given "
                                         f"{getattr(subclass, '__qualname__', repr(subclass))} "
                                         f"({getattr(subclass, '__module__', '?')}), which is no class; register "
                                         f"a subclass of {cls.__name__}")
            if not subclass.__module__.startswith("multigrain."):
                load_builtin()  # a plugin registered before the built-ins must still meet the name it takes
            old = entries.get(name)
            if old is not None and old.cls is not subclass and (not exist_ok or _replaces_builtin(old.cls, subclass)):
                overridden = "; a plugin cannot replace a built-in component (one name and one spec hash would " \
                             "then be two models): register it under a name of its own" if exist_ok else ""
                raise ConfigurationError(
                    f"{cls.kind} {name!r} is registered twice: {old.where} and {_where(subclass)}{overridden}"
                )
            entries[name] = Entry(name, subclass, _where(subclass))
            subclass.registered_name = name
            return subclass

        return add

    @classmethod
    def registry(cls) -> dict[str, Entry]:
        return KINDS[cls.kind]._entries

    @classmethod
    def by_name(cls, name: str) -> type:
        entries = cls.registry()
        if name not in entries:
            load_all()
        if name not in entries:
            raise ConfigurationError(unknown_name_message(cls.kind, name, list(entries)))
        return entries[name].cls

    @classmethod
    def names(cls) -> list[str]:
        load_all()
        return sorted(cls.registry())

    @classmethod
    def is_kind(cls) -> bool:
        return cls.kind is not None and KINDS.get(cls.kind) is cls


def unknown_name_message(kind: str, name: str, choices: list[str], plugin_hint: bool = True) -> str:
    from multigrain.platform.errors import did_you_mean, quoted

    hint = did_you_mean(name, choices)
    listed = ", ".join(sorted(choices)) or "(none registered)"
    return f"unknown {kind} type {quoted(name)}{hint}; valid choices: {listed}{broken_plugins_note()}{PLUGIN_HINT if plugin_hint else ''}"


#: the end of every "unknown <kind> type" message: where components of one's own come from
PLUGIN_HINT = (f"; a component of your own: import its module with --include-package MODULE, or register it "
               f"under the entry-point group {PLUGIN_GROUP!r}")


def broken_plugins_note() -> str:
    """``; plugins that failed to load: ...`` when any did, else empty."""
    return f"; plugins that failed to load: {'; '.join(BROKEN_PLUGINS)}" if BROKEN_PLUGINS else ""


_loaded_builtin = False
_loaded_plugins = False


def load_builtin() -> None:
    global _loaded_builtin
    if not _loaded_builtin:
        _loaded_builtin = True
        for name in BUILTIN_MODULES:
            importlib.import_module(name)
        importlib.import_module(BUILTIN_PACKAGE).import_all()


#: plugin entry points that failed to import: "name (module): error"
BROKEN_PLUGINS: list[str] = []
#: the modules of the plugin entry points that loaded
LOADED_PLUGINS: list[str] = []


def load_plugins() -> list[str]:
    """Import every module named by a ``multigrain.plugins`` entry point; returns their names.

    A plugin that fails to import does not hide the others: it is reported in a warning, and a
    lookup that then misses names it (its components may be the ones asked for)."""
    global _loaded_plugins
    if _loaded_plugins:
        return []
    _loaded_plugins = True
    import warnings
    from importlib.metadata import entry_points

    from multigrain.platform.errors import PluginWarning

    loaded = []
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            with plugin_output_to_stderr():
                ep.load()
        except (Exception, SystemExit) as e:  # sys.exit() in a plugin: not the command's exit
            BROKEN_PLUGINS.append(f"{ep.name} ({ep.value}): {type(e).__name__}: {e}")
            warnings.warn(f"multigrain plugin entry point {ep.name!r} ({ep.value}) failed to load: "
                          f"{type(e).__name__}: {e}", PluginWarning)
            continue
        loaded.append(ep.value)
    LOADED_PLUGINS.extend(loaded)
    return loaded


def plugin_output_to_stderr():
    """While a plugin module is imported: what it prints goes to stderr, so that ``predict``'s
    JSON lines and ``evaluate --json`` on stdout stay machine-readable."""
    import contextlib
    import sys

    return contextlib.redirect_stdout(sys.stderr)


def reset_plugins() -> None:
    """Allow entry points to be scanned again (after installing a plugin at run time)."""
    global _loaded_plugins
    _loaded_plugins = False
    BROKEN_PLUGINS.clear()
    LOADED_PLUGINS.clear()


def load_all() -> None:
    load_builtin()
    load_plugins()


def import_package(name: str, search_dir: str | None = None) -> None:
    """``--include-package``: import a module or package (and its submodules) that registers
    components. With ``search_dir`` (the CLI passes the working directory) a module of that name
    there is imported from there, and only it: the directory is never put on ``sys.path``, so a
    file in it cannot shadow an installed module (a stray ``_jsonnet.py``, say)."""
    import pkgutil
    import sys
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    try:
        local = PathFinder.find_spec(name, [search_dir]) if search_dir and "." not in name else None
        if local is not None and name not in sys.modules:
            module = module_from_spec(local)
            sys.modules[name] = module
            try:
                local.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
        else:
            module = importlib.import_module(name)
    except ImportError as e:
        raise ConfigurationError(f"--include-package {name}: cannot import it: {e}") from e
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), prefix=name + "."):
        importlib.import_module(info.name)


def kind_of(kind: str) -> type[Registrable]:
    load_builtin()
    if kind not in KINDS:
        from multigrain.platform.errors import did_you_mean

        raise ConfigurationError(f"unknown component kind {kind!r}{did_you_mean(kind, list(KINDS))}; "
                                 f"the kinds: {', '.join(sorted(KINDS))}")
    return KINDS[kind]
