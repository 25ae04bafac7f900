"""Construction: whole-spec validation and building of objects from a resolved spec
(Jsonnet, overrides and the spec hash are ``specs``' concern).

Objects are built from the type hints of their ``__init__`` (AllenNLP's FromParams idea):
a parameter annotated with a registry kind takes ``{"type": name, ...}``; scalars, Optional,
Literal, lists and dicts are checked; ``Lazy[X]`` is validated now and built later, when the
arguments it needs (the vocabulary, the model's parameters, an input size) exist.

``validate(spec, schema)`` walks the same hints without building anything and returns every
problem as a ``Problem`` (path, message, kind), e.g. ``model.encoder.num_heads: expected int, got "8x"``.
Numbers are checked for what no hint says: a float must be finite, an int within +-(2**53 - 1), and
a parameter's name implies bounds (``hints.implied_bounds``: sizes and counts >= 1, rates >= 0...).

Arguments the code passes (injected) never silently replace a spec value: a spec key whose value
differs from what the code passes for it is an error naming both; an argument the code passes that
the component does not take is an error too, unless the code only *offers* it
(``Lazy.construct(offered={...})``: given when the constructor takes it). ``vocab`` reaches every
level, ``Lazy`` ones included.

Files that only set first weights (what a class names in ``weight_sources``) must be there in a new spec
(``validate(check_files=True)``: a file, or a run directory with its ``best.pt``; ``paths.weights_missing``); a
model built for a checkpoint's weights (``construct(checkpoint_follows=True)``: a run directory as an archive) leaves
them out, as AllenNLP drops ``pretrained_file`` loading an archive.
"""
from __future__ import annotations

import inspect
import json
import math
import sys
import typing
from typing import Annotated, Any, Generic, Literal, TypeVar, Union

from multigrain.platform.errors import ConfigurationError, DataError, Problem, SpecError, did_you_mean, quoted
from multigrain.platform.hints import Matches, Range, constructor_parameters, describe, implied_bounds
from multigrain.platform.registry import PLUGIN_HINT, Registrable, broken_plugins_note, load_all
from multigrain.platform.paths import input_problem, weights_missing

T = TypeVar("T")

#: constructor arguments the platform passes to every level of a build (never read from a spec).
#: Arguments known only later (an optimizer's parameters, an encoder's input size) are
#: given to ``Lazy.construct`` instead.
INJECTED = {"vocab"}

#: the largest integer a spec may hold: Jsonnet numbers are doubles, exact up to 2**53 - 1
MAX_INT = 2**53 - 1
class Lazy(Generic[T]):
    """A validated spec for ``T`` whose construction waits for arguments known later."""

    def __init__(self, annotation: Any, spec: Any, path: str, inherited: dict | None = None,
                 checkpoint_follows: bool = False):
        self.annotation = annotation
        self.spec = spec
        self.path = path
        self.inherited = dict(inherited or {})  # injected arguments (``vocab``) of the enclosing build
        self.checkpoint_follows = checkpoint_follows  # that of the enclosing build

    def construct(self, offered: dict | None = None, checkpoint_follows: bool = False, **extras) -> T:
        """Build with ``extras`` (each must be taken by the constructor) and ``offered`` (given
        only where the constructor takes them), plus the injected arguments of the enclosing build.
        ``checkpoint_follows``: a checkpoint's weights come next; no class reads its ``weight_sources``."""
        caller = _caller_name()
        errors: list[Problem] = []
        context = _Extras({**self.inherited, **extras}, dict(offered or {}), caller,
                          checkpoint_follows or self.checkpoint_follows)
        obj = _convert(self.annotation, self.spec, self.path, errors, context, build=True)
        if errors:
            raise SpecError(errors)
        return obj

    @property
    def type_name(self) -> str | None:
        """The registered name the spec picks (``{"type": ...}``), if any."""
        spec = self.spec
        return spec if isinstance(spec, str) else spec.get("type") if isinstance(spec, dict) else None

    def __repr__(self):
        return f"Lazy({self.path})"


class _Extras:
    """Arguments the code passes during a build: ``given`` must be taken, ``offered`` may be."""

    def __init__(self, given: dict, offered: dict | None = None, by: str = "the platform",
                 checkpoint_follows: bool = False, check_files: bool = False):
        self.given, self.offered, self.by = given, offered or {}, by
        self.checkpoint_follows, self.check_files = checkpoint_follows, check_files

    def inherited(self) -> "_Extras":
        """Only the injected names flow down into nested objects (``vocab`` reaches every level),
        with the flags."""
        return _Extras({k: v for k, v in self.given.items() if k in INJECTED}, {}, self.by, self.checkpoint_follows,
                       self.check_files)


def _caller_name() -> str:
    frame = sys._getframe(2)
    owner = frame.f_locals.get("self")
    name = frame.f_code.co_name
    return f"{type(owner).__name__}.{name}" if owner is not None else name


# ---------------------------------------------------------------------------- validation and building
def validate(spec: Any, schema: type, path: str = "", check_files: bool = False) -> list[Problem]:
    """Every problem in ``spec`` against ``schema``'s constructor, nothing built; ``check_files``: also
    a ``weight_sources`` file that is not there (a new spec, whose build will read them)."""
    errors: list[Problem] = []
    _construct_class(schema, spec, path, errors, _Extras({}, check_files=check_files), build=False)
    return errors


def build(schema: type, spec: Any, path: str = "", validated: bool = False, **extras) -> Any:
    """Build ``schema`` from ``spec``, validating everything first unless the caller just did."""
    if not validated:
        errors = validate(spec, schema, path)
        if errors:
            raise SpecError(errors)
    errors = []
    obj = _construct_class(schema, spec, path, errors, _Extras(extras, {}, _caller_name()), build=True)
    if errors:
        raise SpecError(errors)
    return obj


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = str(key) if len(str(key)) <= MAX_KEY_SHOWN else f"{str(key)[:MAX_KEY_SHOWN - 20]}...({len(str(key)):,} chars)"
    return f"{path}.{key}" if path else key


#: a spec key longer than this is cut where a spec path shows it (an 11 MB key was an 11 MB error line)
MAX_KEY_SHOWN = 100


def _got(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _expected(path: str, what: str, value: Any, hint: str = "") -> Problem:
    return Problem(path, f"expected {what}, got {_got(value)}{hint}", "type")


def _convert(annotation: Any, value: Any, path: str, errors: list[Problem], extras: _Extras, build: bool) -> Any:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return value
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        before = len(errors)
        huge = isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT
        # a stated bound names the range of a huge integer better than the int check's +-MAX_INT
        converted = value if huge and any(isinstance(b, Range) and b.problem(value) for b in args[1:]) \
            else _convert(args[0], value, path, errors, extras, build)
        for bound in (m for m in args[1:] if isinstance(m, (Range, Matches))):
            problem = bound.problem(value) if len(errors) == before else None
            if problem:
                errors.append(Problem(path, problem, "value"))
        return converted

    if origin is Lazy or annotation is Lazy:
        inner = args[0] if args else Any
        lazy_errors: list[Problem] = []
        _convert(inner, value, path, lazy_errors, _Extras({}, check_files=extras.check_files), build=False)
        # the Lazy's own arguments may arrive at construct() time: not missing yet
        errors.extend(e for e in lazy_errors if not _is_own_missing(e, path))
        return Lazy(inner, value, path, extras.inherited().given, extras.checkpoint_follows) if build else None

    if origin is Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        if value is None and type(None) in args:
            return None
        candidates = [a for a in args if a is not type(None)]
        first_errors = None
        for cand in candidates:
            trial: list[Problem] = []
            result = _convert(cand, value, path, trial, extras, build)
            if not trial:
                return result
            if first_errors is None:
                first_errors = trial
        if len(candidates) == 1 or _all_structured(candidates):
            errors.extend(first_errors or [])
        else:
            errors.append(_expected(path, describe(annotation), value))
        return None

    if origin is Literal:
        if value not in args:
            errors.append(_expected(path, describe(annotation), value, did_you_mean(value, args)))
        return value

    if origin in (list, typing.List, tuple) or annotation in (list, tuple):
        if not isinstance(value, list):
            errors.append(_expected(path, "a list", value))
            return None
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                errors.append(Problem(path, f"expected {len(args)} items, got {len(value)}", "type"))
                return None
            items = [_convert(a, v, _join(path, i), errors, extras, build) for i, (a, v) in enumerate(zip(args, value))]
            return tuple(items)
        item_type = args[0] if args else Any
        items = [_convert(item_type, v, _join(path, i), errors, extras, build) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items

    if origin in (dict, typing.Dict) or annotation is dict:
        if not isinstance(value, dict):
            errors.append(_expected(path, "an object", value))
            return None
        val_type = args[1] if len(args) == 2 else Any
        return {k: _convert(val_type, v, _join(path, k), errors, extras, build) for k, v in value.items()}

    if annotation is bool:
        if not isinstance(value, bool):
            errors.append(_expected(path, "bool", value))
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(_expected(path, "int", value))  # 2.0 too: it would change the spec hash
        elif abs(value) > MAX_INT:
            errors.append(Problem(path, f"{value} is out of range: a spec's integers lie within +-{MAX_INT} "
                                        f"(2**53 - 1, the largest a Jsonnet number holds exactly)", "value"))
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append(_expected(path, "float", value))
            return value
        number = float(value) if isinstance(value, float) or abs(value) <= MAX_INT else math.inf
        if not math.isfinite(number):
            errors.append(Problem(path, f"expected a finite number, got {_got(value)}", "value"))
            return value
        return number
    if annotation is str:
        if not isinstance(value, str):
            errors.append(_expected(path, "str", value))
        return value

    if isinstance(annotation, type):
        if isinstance(value, annotation) and not isinstance(value, dict):
            return value  # already built (tests, programmatic use)
        if issubclass(annotation, Registrable) and annotation.kind is not None:
            return _construct_registrable(annotation, value, path, errors, extras, build)
        return _construct_class(annotation, value, path, errors, extras, build)
    return value


def _all_structured(candidates) -> bool:
    return all(isinstance(c, type) and issubclass(c, Registrable) for c in candidates)


def _is_own_missing(problem: Problem, lazy_path: str) -> bool:
    """A missing argument of the Lazy object itself (not of something nested in it)."""
    if problem.kind != "missing":
        return False
    prefix = f"{lazy_path}." if lazy_path else ""
    rest = problem.path[len(prefix):] if problem.path.startswith(prefix) else None
    return rest is not None and "." not in rest and "[" not in rest


def _construct_registrable(base: type, value: Any, path: str, errors: list[Problem], extras: _Extras, build: bool):
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict):
        errors.append(_expected(path, f'a {base.kind} object like {{"type": ...}}', value))
        return None
    params = dict(value)
    name = params.pop("type", None)
    kind_base = _kind_base(base)
    type_path = _join(path, "type")
    if name is None:
        if base is not kind_base and "registered_name" in base.__dict__:
            cls = base  # a concrete class named directly by the type hint
        elif kind_base.default_implementation:
            name = kind_base.default_implementation
        else:
            load_all()
            errors.append(Problem(type_path, f"missing; choose one of: {_choices(kind_base)}", "type"))
            return None
    if name is not None:
        if not isinstance(name, str):
            errors.append(_expected(type_path, "str", name))
            return None
        entries = kind_base.registry()
        if name not in entries:
            load_all()
        if name not in entries:
            errors.append(Problem(type_path, f"unknown {kind_base.kind} type {quoted(name)}"
                                             f"{did_you_mean(name, entries)}; valid choices: {_choices(kind_base)}"
                                             f"{broken_plugins_note()}{PLUGIN_HINT}", "type"))
            return None
        cls = entries[name].cls
        if not issubclass(cls, base):
            errors.append(Problem(type_path, f"{name!r} is a {kind_base.kind} but not a {base.__name__}", "type"))
            return None
    return _construct_class(cls, params, path, errors, extras, build)


def _kind_base(cls: type) -> type:
    for klass in cls.__mro__:
        if isinstance(klass, type) and issubclass(klass, Registrable) and klass.__dict__.get("kind"):
            return klass
    return cls


def _choices(kind_base: type) -> str:
    entries = kind_base.registry()
    return ", ".join(f"{n} ({e.cls.__module__})" for n, e in sorted(entries.items())) or "(none registered)"


def _same_value(spec_value: Any, given: Any) -> bool:
    """Whether a spec value states exactly what the code passes (JSON-like values only)."""
    if isinstance(given, bool) or isinstance(spec_value, bool):
        return spec_value is given
    if isinstance(given, (int, float, str)) or given is None:
        return type(spec_value) in (int, float, str, type(None)) and spec_value == given
    if isinstance(given, (list, tuple)):
        return isinstance(spec_value, list) and len(spec_value) == len(given) and all(
            _same_value(a, b) for a, b in zip(spec_value, given))
    return False


def _construct_class(cls: type, value: Any, path: str, errors: list[Problem], extras: _Extras, build: bool):
    if value is None:
        value = {}
    if not isinstance(value, dict):
        errors.append(Problem(path, f"expected an object for {cls.__name__}, got {_got(value)}", "type"))
        return None
    try:
        params, hints, var_kw = constructor_parameters(cls)
    except ConfigurationError as e:  # a plugin's hint naming a type that does not exist
        errors.append(Problem(path, str(e), "type"))
        return None
    kwargs = {}
    for key in value:
        if key not in params and not var_kw:
            valid = ", ".join(sorted(k for k in params if k not in INJECTED))
            errors.append(Problem(_join(path, key), f"unknown key for {cls.__name__}{did_you_mean(key, params)}; "
                                                    f"valid keys: {valid}", "unknown_key"))
    given = {k: v for k, v in extras.given.items() if k in params or var_kw}
    given.update({k: v for k, v in extras.offered.items() if k in params and k not in given})
    left_out = set(getattr(cls, "weight_sources", ())) if build and extras.checkpoint_follows else set()
    if build:
        dropped = sorted(k for k in extras.given if k not in given and k not in INJECTED)
        if dropped:
            errors.append(Problem(path, f"{cls.__name__} takes no argument {', '.join(map(repr, dropped))}, which "
                                        f"{extras.by} passes (a bug in that code, not in the spec)", "argument"))
    for name, p in params.items():
        sub = _join(path, name)
        if name in given:
            if name in value and not _same_value(value[name], given[name]):
                errors.append(Problem(sub, f"the spec sets {_got(value[name])}, but {extras.by} passes "
                                           f"{name}={_got(given[name])} to {cls.__name__}; remove the key "
                                           f"(the code's value is the one a model can use)", "injected"))
            kwargs[name] = given[name]
        elif name in value and not (name in left_out and p.default is not inspect.Parameter.empty):
            hint = implied_bounds(name, hints.get(name, p.annotation), p.default)
            kwargs[name] = _convert(hint, value[name], sub, errors, extras.inherited(), build)
        elif p.default is inspect.Parameter.empty:
            if name in INJECTED:
                if build:
                    errors.append(Problem(sub, f"the platform did not provide {name!r} (a bug, not a spec error)",
                                          "argument"))
            else:
                errors.append(Problem(sub, "missing required argument", "missing"))
    for key in value:
        if key not in params and var_kw:
            kwargs[key] = value[key]
    if not build and extras.check_files:
        errors += [Problem(_join(path, name), problem, "file") for name in getattr(cls, "weight_sources", ())
                   if isinstance(value.get(name), str) and (problem := weights_missing(value[name]))]
        errors += [Problem(_join(path, name), problem, "file") for name in getattr(cls, "input_files", ())
                   if isinstance(value.get(name), str) and (problem := input_problem(value[name], "file"))]
    if not build or errors:
        return None
    try:
        return cls(**kwargs)
    except (SpecError, DataError, MemoryError):  # a data file's fault names its file and line itself
        raise
    except (ValueError, TypeError, ConfigurationError, OSError) as e:  # OSError: a file the spec names
        errors.append(Problem(path, f"{cls.__name__}: {e}", "value"))
        return None
    except Exception as e:  # noqa: BLE001 - a constructor's own failure (a plugin's RuntimeError), at its spec path
        errors.append(Problem(path, f"{cls.__name__}: {type(e).__name__}: {e}", "value"))
        return None
