"""What the construction engine reads from a constructor: its parameters, their type hints
(``Annotated`` bounds kept), the bounds a parameter's name implies, and how to describe a hint to
a user."""
from __future__ import annotations

import inspect
import json
import typing
from typing import Annotated, Any, Literal, Union

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.registry import Registrable


class Range:
    """Bounds of a number, declared in a constructor's hint: ``num_epochs: Annotated[int, Range(1)]``.
    Checked at validation, before anything is built or written. Every float argument named
    ``dropout`` or ``*_dropout`` is a probability in [0, 1) without saying so."""

    def __init__(self, low: float | None = None, high: float | None = None, high_open: bool = False,
                 low_open: bool = False):
        self.low, self.high, self.high_open, self.low_open = low, high, high_open, low_open

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None  # the type check reports it
        if value != value:
            return "expected a number, got NaN"
        too_high = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        too_low = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        if too_low or too_high:
            return f"{value!r} is out of range: expected {self}"
        return None

    def __str__(self) -> str:
        low, high = _number(self.low), _number(self.high)
        if self.high is None:
            return f"> {low}" if self.low_open else f">= {low}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        if self.low is None:
            return f"< {high}" if self.high_open else f"<= {high}"
        return f"a value in {left}{low}, {high}{right}"


def _number(value: float | None) -> str:
    """A bound as written: integers in full (2147483647, not 2.14748e+09), other numbers short."""
    return str(value) if isinstance(value, int) else f"{value:g}" if value is not None else ""


PROBABILITY = Range(0.0, 1.0, high_open=True)


class Matches:
    """A string's required shape, declared in a hint: ``Annotated[str, Matches(r"[+-]\\w+", "+NAME or -NAME")]``."""

    def __init__(self, pattern: str, description: str):
        self.pattern, self.description = pattern, description

    def problem(self, value: Any) -> str | None:
        import re

        if not isinstance(value, str) or re.fullmatch(self.pattern, value):
            return None
        return f"expected {self.description}, got {json.dumps(value, ensure_ascii=False)}"


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
        own_hints = type_hints(klass, init)
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


def type_hints(cls: type, init) -> dict[str, Any]:
    try:
        return typing.get_type_hints(init, include_extras=True)
    except NameError:
        # a kind named as a string (imported only under TYPE_CHECKING): resolve it by the registry
        from multigrain.platform.registry import KINDS, load_builtin

        load_builtin()
        try:
            return typing.get_type_hints(init, localns={k.__name__: k for k in KINDS.values()}, include_extras=True)
        except Exception as e:
            raise ConfigurationError(f"cannot read the type hints of {cls.__module__}.{cls.__qualname__}: {e}") from e
    except Exception as e:  # an unresolvable annotation is a programming error: say where
        raise ConfigurationError(f"cannot read the type hints of {cls.__module__}.{cls.__qualname__}: {e}") from e


def describe(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if annotation is type(None):
        return "null"
    if origin is Union:
        return " or ".join(describe(a) for a in typing.get_args(annotation))
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin in (list, tuple, dict) or origin is not None:
        return str(annotation).replace("typing.", "")
    if isinstance(annotation, type):
        if issubclass(annotation, Registrable) and annotation.kind:
            return f"a {annotation.kind} object"
        return annotation.__name__
    return str(annotation)


#: the largest size, dimension or count (``*_dim``, ``*_size``, ``num_*``): a C int, as torch's sizes
MAX_COUNT = 2**31 - 1


def implied_bounds(name: str, hint: Any, default: Any) -> Any:
    """``hint`` with the bounds its parameter's name implies, unless the hint states its own: a float
    ``dropout``/``*_dropout`` is a probability in [0, 1); a float ``lr``/``*_lr``/``learning_rate``
    is at least 0; an int ``*_dim``, ``*_size`` or ``num_*`` lies in [1, MAX_COUNT] ([0, ...] when
    its default is 0, or from the lower bound its hint states: ``Annotated[int, Range(0)]`` where 0
    means "none")."""
    base, stated = _plain(hint)
    if base is float and not stated and (name == "dropout" or name.endswith("_dropout")):
        return Annotated[hint, PROBABILITY]
    if base is float and not stated and (name in ("lr", "learning_rate") or name.endswith("_lr")):
        return Annotated[hint, Range(0)]
    if base is int and (name.endswith(("_dim", "_size")) or name.startswith("num_")):
        low = stated[0].low if stated else 0 if default == 0 and not isinstance(default, bool) else 1
        return Annotated[hint, Range(low, MAX_COUNT)]
    return hint


def _plain(hint: Any) -> tuple[Any, list[Range]]:
    """(the type under Optional and Annotated, the Ranges its Annotated hints state)."""
    stated: list[Range] = []
    while True:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is Annotated:
            stated += [m for m in args[1:] if isinstance(m, Range)]
            hint = args[0]
        elif origin is Union and len([a for a in args if a is not type(None)]) == 1:
            hint = next(a for a in args if a is not type(None))
        else:
            return hint, stated
