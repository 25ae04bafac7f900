"""A supervisor that runs a command in its own process group and takes the whole group down with
it: ``python -m multigrain.platform.process_group PARENT_PID -- COMMAND...``.

``multigrain ui`` starts ``mlflow server`` through it, in a new session (the supervisor leads the
group). ``mlflow server`` starts uvicorn, which a ``PR_SET_PDEATHSIG`` on the server alone would
not reach (the setting is not inherited by a child), so the supervisor

- gets SIGTERM when its parent dies, even by SIGKILL (``lifeline.die_with_parent``; Linux);
- is the reaper of the group's orphans (``PR_SET_CHILD_SUBREAPER``), so it can wait for all;
- on SIGTERM, SIGINT or SIGHUP, or when the command ends, sends SIGTERM to its group, waits up
  to ``GRACE_SECONDS`` for every descendant to end, then SIGKILLs the group (itself included).

Its exit status is the command's (0 when stopped by a signal). Only the standard library.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from multigrain.platform import lifeline
from multigrain.platform.digits import whole_number

GRACE_SECONDS = 5.0


class _Stop(BaseException):
    pass


def _stop(signum, frame):
    raise _Stop


def end_group(grace: float = GRACE_SECONDS) -> None:
    """SIGTERM to every other process of this group, wait for all descendants, then SIGKILL."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM is for the others
    try:
        os.killpg(0, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left: orphans came to us, so no descendant either
            return
        if pid == 0:
            time.sleep(0.05)
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    if len(argv) < 3 or argv[1] != "--" or whole_number(argv[0]) is None:
        print("usage: python -m multigrain.platform.process_group PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    code = 0
    try:
        lifeline.die_with_parent(int(argv[0]), signal.SIGTERM)
        lifeline.adopt_orphans()
        child = subprocess.Popen(argv[2:])
        code = child.wait()
        code = code if code >= 0 else 128 - code  # a signal's number, as a shell reports it
    except _Stop:
        code = 0
    finally:
        for sig in (signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        end_group()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
