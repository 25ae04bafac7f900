"""Specs: Jsonnet evaluation, ``-o`` overrides, whole-spec validation and construction.

Objects are built from the type hints of their ``__init__`` (AllenNLP's FromParams idea):
a parameter annotated with a registry kind takes ``{"type": name, ...}``; scalars, Optional,
Literal, lists and dicts are checked; ``Lazy[X]`` is validated now and built later, when the
arguments it needs (the vocabulary, the model's parameters, an input size) exist.

``validate(spec, schema)`` walks the same hints without building anything and returns every
problem with its path, e.g. ``model.encoder.num_heads: expected int, got "8x"``.
"""
from __future__ import annotations

import inspect
import json
import typing
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, Union

from multigrain.platform.errors import ConfigurationError, SpecError, did_you_mean
from multigrain.platform.registry import Registrable, load_all

T = TypeVar("T")

#: constructor arguments the platform passes to every level of a build (never read from a spec).
#: Arguments known only later (an optimizer's parameters, an encoder's input size) are
#: given to ``Lazy.construct`` instead.
INJECTED = {"vocab"}


class Lazy(Generic[T]):
    """A validated spec for ``T`` whose construction waits for arguments known later."""

    def __init__(self, annotation: Any, spec: Any, path: str):
        self.annotation = annotation
        self.spec = spec
        self.path = path

    def construct(self, **extras) -> T:
        errors: list[str] = []
        obj = _convert(self.annotation, self.spec, self.path, errors, extras, build=True)
        if errors:
            raise SpecError(errors)
        return obj

    def __repr__(self):
        return f"Lazy({self.path})"


# ---------------------------------------------------------------------------- validation and building
def validate(spec: Any, schema: type, path: str = "") -> list[str]:
    """Every problem in ``spec`` against ``schema``'s constructor, nothing built."""
    errors: list[str] = []
    _construct_class(schema, spec, path, errors, {}, build=False)
    return errors


def build(schema: type, spec: Any, path: str = "", **extras) -> Any:
    """Validate everything first; then build ``schema`` from ``spec``."""
    errors = validate(spec, schema, path)
    if errors:
        raise SpecError(errors)
    errors = []
    obj = _construct_class(schema, spec, path, errors, extras, build=True)
    if errors:
        raise SpecError(errors)
    return obj


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _describe(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if annotation is type(None):
        return "null"
    if origin is Union:
        return " or ".join(_describe(a) for a in typing.get_args(annotation))
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin in (list, tuple, dict) or origin is not None:
        return str(annotation).replace("typing.", "")
    if isinstance(annotation, type):
        if issubclass(annotation, Registrable) and annotation.kind:
            return f"a {annotation.kind} object"
        return annotation.__name__
    return str(annotation)


def _got(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _convert(annotation: Any, value: Any, path: str, errors: list[str], extras: dict, build: bool) -> Any:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return value
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)

    if origin is Lazy or annotation is Lazy:
        inner = args[0] if args else Any
        lazy_errors: list[str] = []
        _convert(inner, value, path, lazy_errors, {}, build=False)
        # the Lazy's own arguments may arrive at construct() time: not missing yet
        errors.extend(e for e in lazy_errors if not _is_own_missing(e, path))
        return Lazy(inner, value, path) if build else None

    if origin is Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        if value is None and type(None) in args:
            return None
        candidates = [a for a in args if a is not type(None)]
        first_errors = None
        for cand in candidates:
            trial: list[str] = []
            result = _convert(cand, value, path, trial, extras, build)
            if not trial:
                return result
            if first_errors is None:
                first_errors = trial
        if len(candidates) == 1 or _all_structured(candidates):
            errors.extend(first_errors or [])
        else:
            errors.append(f"{path}: expected {_describe(annotation)}, got {_got(value)}")
        return None

    if origin is Literal:
        if value not in args:
            errors.append(f"{path}: expected {_describe(annotation)}, got {_got(value)}"
                          f"{did_you_mean(value, args)}")
        return value

    if origin in (list, typing.List, tuple) or annotation in (list, tuple):
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {_got(value)}")
            return None
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                errors.append(f"{path}: expected {len(args)} items, got {len(value)}")
                return None
            items = [_convert(a, v, _join(path, i), errors, extras, build) for i, (a, v) in enumerate(zip(args, value))]
            return tuple(items)
        item_type = args[0] if args else Any
        items = [_convert(item_type, v, _join(path, i), errors, extras, build) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items

    if origin in (dict, typing.Dict) or annotation is dict:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected an object, got {_got(value)}")
            return None
        val_type = args[1] if len(args) == 2 else Any
        return {k: _convert(val_type, v, _join(path, k), errors, extras, build) for k, v in value.items()}

    if annotation is bool:
        if not isinstance(value, bool):
            errors.append(f"{path}: expected bool, got {_got(value)}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            errors.append(f"{path}: expected int, got {_got(value)}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errors.append(f"{path}: expected float, got {_got(value)}")
            return value
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            errors.append(f"{path}: expected str, got {_got(value)}")
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


_MISSING = "missing required argument"


def _is_own_missing(error: str, lazy_path: str) -> bool:
    where, _, what = error.partition(": ")
    if what != _MISSING:
        return False
    prefix = f"{lazy_path}." if lazy_path else ""
    rest = where[len(prefix):] if where.startswith(prefix) else None
    return rest is not None and "." not in rest and "[" not in rest


def _construct_registrable(base: type, value: Any, path: str, errors: list, extras: dict, build: bool):
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict):
        errors.append(f"{path}: expected a {base.kind} object like {{\"type\": ...}}, got {_got(value)}")
        return None
    params = dict(value)
    name = params.pop("type", None)
    kind_base = _kind_base(base)
    if name is None:
        if base is not kind_base and "registered_name" in base.__dict__:
            cls = base  # a concrete class named directly by the type hint
        elif kind_base.default_implementation:
            name = kind_base.default_implementation
        else:
            load_all()
            errors.append(f"{_join(path, 'type')}: missing; choose one of: {_choices(kind_base)}")
            return None
    if name is not None:
        if not isinstance(name, str):
            errors.append(f"{_join(path, 'type')}: expected str, got {_got(name)}")
            return None
        entries = kind_base.registry()
        if name not in entries:
            load_all()
        if name not in entries:
            errors.append(f"{_join(path, 'type')}: unknown {kind_base.kind} type {name!r}"
                          f"{did_you_mean(name, entries)}; valid choices: {_choices(kind_base)}")
            return None
        cls = entries[name].cls
        if not issubclass(cls, base):
            errors.append(f"{_join(path, 'type')}: {name!r} is a {kind_base.kind} but not a {base.__name__}")
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


def constructor_parameters(cls: type) -> tuple[dict[str, inspect.Parameter], dict[str, Any], bool]:
    """(parameters by name, resolved type hints, accepts unknown keys) of ``cls.__init__``.

    An ``__init__`` that passes ``**kwargs`` up to its parent also takes the parent's
    parameters (AllenNLP-style readers): the walk goes up the MRO until an ``__init__``
    without ``**kwargs``, so a misspelt inherited key is still an error.
    """
    params: dict[str, inspect.Parameter] = {}
    hints: dict[str, Any] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object or not inspect.isfunction(init):
            return params, hints, False
        sig = inspect.signature(init)
        own_hints = _type_hints(klass, init)
        var_kw = False
        for name, p in sig.parameters.items():
            if name == "self" or p.kind == p.VAR_POSITIONAL:
                continue
            if p.kind == p.VAR_KEYWORD:
                var_kw = True
            elif name not in params:
                params[name] = p
                if name in own_hints:
                    hints[name] = own_hints[name]
        if not var_kw:
            return params, hints, False
    return params, hints, True


def _type_hints(cls: type, init) -> dict[str, Any]:
    try:
        return typing.get_type_hints(init)
    except NameError:
        # a kind named as a string (imported only under TYPE_CHECKING): resolve it by the registry
        from multigrain.platform.registry import KINDS, load_builtin

        load_builtin()
        try:
            return typing.get_type_hints(init, localns={k.__name__: k for k in KINDS.values()})
        except Exception as e:
            raise ConfigurationError(f"cannot read the type hints of {cls.__module__}.{cls.__qualname__}: {e}") from e
    except Exception as e:  # an unresolvable annotation is a programming error: say where
        raise ConfigurationError(f"cannot read the type hints of {cls.__module__}.{cls.__qualname__}: {e}") from e


def _construct_class(cls: type, value: Any, path: str, errors: list, extras: dict, build: bool):
    if value is None:
        value = {}
    if not isinstance(value, dict):
        errors.append(f"{path or 'spec'}: expected an object for {cls.__name__}, got {_got(value)}")
        return None
    params, hints, var_kw = constructor_parameters(cls)
    kwargs = {}
    for key in value:
        if key not in params and not var_kw:
            valid = ", ".join(sorted(k for k in params if k not in INJECTED))
            errors.append(f"{_join(path, key)}: unknown key for {cls.__name__}{did_you_mean(key, params)}; "
                          f"valid keys: {valid}")
    for name, p in params.items():
        sub = _join(path, name)
        if name in extras:
            kwargs[name] = extras[name]
        elif name in value:
            kwargs[name] = _convert(hints.get(name, p.annotation), value[name], sub, errors, _inherited(extras), build)
        elif p.default is inspect.Parameter.empty:
            if name in INJECTED:
                if build:
                    errors.append(f"{sub}: the platform did not provide {name!r} (a bug, not a spec error)")
            else:
                errors.append(f"{sub}: {_MISSING}")
    for key in value:
        if key not in params and var_kw:
            kwargs[key] = value[key]
    if not build or errors:
        return None
    try:
        return cls(**kwargs)
    except SpecError:
        raise
    except (ValueError, TypeError, ConfigurationError) as e:
        errors.append(f"{path or 'spec'}: {cls.__name__}: {e}")
        return None


def _inherited(extras: dict) -> dict:
    """Only the injected names flow down into nested objects (``vocab`` reaches every level)."""
    return {k: v for k, v in extras.items() if k in INJECTED}
