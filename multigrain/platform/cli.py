"""The ``multigrain`` console entry point (``python -m multigrain.platform.cli``); the commands
live in ``multigrain.platform.commands``."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    """``commands.main`` in a process made safe for it (``startup.prepare``: its standard streams,
    working directory and limits), then a signal during the interpreter's teardown ends the process
    with the command's exit code (``interruption.end_at_once_with``)."""
    from multigrain.platform import interruption, startup

    problem = startup.prepare()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from multigrain.platform.commands import main as run_command

    code = run_command(argv)
    interruption.end_at_once_with(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
