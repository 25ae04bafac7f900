"""Replace one ``## Section`` of benchmarks/RESULTS.md, leaving the others as they are.

Several benchmarks write the same file, possibly at once: the read-modify-write holds an
exclusive lock on it.
"""
from __future__ import annotations

import fcntl
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(section: str, body: str | list[str], results: Path = RESULTS) -> None:
    """``section`` is the heading line (``"## CRF decode"``); ``body`` what goes under it."""
    body_lines = body.strip("\n").splitlines() if isinstance(body, str) else list(body)
    if body_lines and body_lines[0].strip() == section:
        body_lines = body_lines[1:]
    results = Path(results)
    results.parent.mkdir(parents=True, exist_ok=True)
    with open(results, "a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        lines = f.read().splitlines() or ["# Benchmark results"]
        start = next((i for i, line in enumerate(lines) if line.strip() == section), None)
        if start is None:
            lines = lines + ["", section] + body_lines
        else:
            end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
            tail = [""] + lines[end:] if end < len(lines) else []
            lines = lines[:start] + [section] + body_lines + tail
        f.seek(0)
        f.truncate()
        f.write("\n".join(lines).rstrip("\n") + "\n")
        fcntl.flock(f, fcntl.LOCK_UN)
