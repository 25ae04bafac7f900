"""The check shared by serving and evaluation: every run directory is an archive whose plugins
the user imported, every data file exists, and each archive gets a unique URL-safe name - before
Ray starts."""
from __future__ import annotations

import re
from pathlib import Path

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.plugins import check_recorded


def check_archives(run_dirs: list[str], data_paths: tuple = (), predicting: bool = False) -> dict[str, str]:
    """Name -> run dir for every archive (names unique and URL-safe); every missing or unreadable
    archive (no run directory, a spec that does not validate, no regular ``best.pt``) or data file,
    and with ``predicting`` every model that predicts nothing (a pre-training run), in one error,
    before Ray starts."""
    problems, names = [], {}
    for rd in run_dirs:
        path = Path(rd)
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError) as e:  # a loop of symbolic links: RuntimeError on Python 3.11
            problems.append(f"{rd}: cannot be read ({getattr(e, 'strerror', None) or 'a loop of symbolic links'})")
            continue
        if problem := _archive_problem(path, predicting):
            problems.append(problem)
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", resolved.name) or "model"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names[name] = str(resolved)
    problems += [f"--data {p}: file not found" for p in data_paths if not Path(p).is_file()]
    if problems:
        raise ConfigurationError("\n".join(problems))
    return names


def _archive_problem(path: Path, predicting: bool):
    """Why the run directory ``path`` cannot be served or evaluated, else None: checked here so that
    no replica starts on it (a ``best.pt`` that is no whole torch file, too; its tensors are checked
    when a replica loads them)."""
    from multigrain.platform.errors import MultigrainError
    from multigrain.platform.runs import Run  # here: importing this module imports no torch
    from multigrain.platform.weights import torch_file

    if not (path / "config.json").exists():
        return f"{path}: not a multigrain run directory (no config.json)"
    if not (path / "best.pt").exists():
        return f"{path}: no best.pt (did its training finish an epoch?)"
    try:  # the plugins it names must be the user's (--include-package): the replicas get those
        check_recorded(path)
        torch_file(path / "best.pt")
        run = Run.open(path)
    except MultigrainError as e:
        return str(e)
    return run.prediction_refused() if predicting else None
