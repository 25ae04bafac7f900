"""Registered building blocks, one folder per kind. ``import_all()`` registers every built-in."""
from __future__ import annotations

import importlib
import pkgutil


def import_all() -> None:
    for info in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        importlib.import_module(info.name)
