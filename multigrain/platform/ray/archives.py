"""The check shared by serving and evaluation: every run directory is an archive whose plugins
the user imported, every data file exists, and each archive gets a unique URL-safe name - before
Ray starts."""
from __future__ import annotations

import re
from pathlib import Path

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.plugins import check_recorded


def check_archives(run_dirs: list[str], data_paths: tuple = (), predicting: bool = False) -> dict[str, str]:
    """Name -> run dir for every archive (names unique and URL-safe); every missing archive or
    data file, and with ``predicting`` every model that predicts nothing (a pre-training run), in
    one error, before Ray starts."""
    problems, names = [], {}
    for rd in run_dirs:
        path = Path(rd)
        if not (path / "config.json").exists():
            problems.append(f"{rd}: not a multigrain run directory (no config.json)")
        elif not (path / "best.pt").exists():
            problems.append(f"{rd}: no best.pt (did its training finish an epoch?)")
        else:
            try:  # the plugins it names must be the user's (--include-package): the replicas get those
                check_recorded(path)
            except ConfigurationError as e:
                problems.append(str(e))
            if predicting and (refused := _prediction_refused(path)):
                problems.append(refused)
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().name) or "model"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names[name] = str(path.resolve())
    problems += [f"--data {p}: file not found" for p in data_paths if not Path(p).is_file()]
    if problems:
        raise ConfigurationError("\n".join(problems))
    return names


def _prediction_refused(run_dir: Path):
    """Why the run's model predicts nothing (a pre-training run), else None; a spec that cannot be
    read is left to loading the archive, which says what is wrong with it."""
    from multigrain.platform.runs import Run  # here: importing this module imports no torch

    try:
        return Run.open(run_dir).prediction_refused()
    except ConfigurationError:
        return None
