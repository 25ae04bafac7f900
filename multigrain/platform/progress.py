"""Progress bars for long loops; silent under ``CI=true`` or ``MULTIGRAIN_QUIET=1``."""
from __future__ import annotations

import os
import sys


def quiet() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("MULTIGRAIN_QUIET") == "1"


def progress(iterable, total=None, desc: str = ""):
    if quiet():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True, file=sys.stderr,
                mininterval=0.5)
