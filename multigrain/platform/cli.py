"""The ``multigrain`` console entry point (``python -m multigrain.platform.cli``); the commands
live in ``multigrain.platform.commands``."""
from __future__ import annotations

import sys

from multigrain.platform.commands import main

if __name__ == "__main__":
    sys.exit(main())
