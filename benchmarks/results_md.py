"""Replace one ``## Section`` of benchmarks/RESULTS.md, leaving the others as they are, and keep
the rows of a results table in a JSON store across invocations.

The stores are tracked files (``benchmarks/results/<table>.json``), not run directories: a fresh
checkout re-running one spec must not drop the rows measured by earlier sessions, whose run
directories (``runs/``, ignored by git) are gone. Several benchmarks write the same files,
possibly at once: each read-modify-write holds an exclusive lock on the file. Also the
``-o``/``--tag``/``--store`` options the results scripts share.
"""
from __future__ import annotations

import fcntl
import json
import statistics
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
STORES = Path(__file__).resolve().parent / "results"


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


def save_row(store: Path, stem: str | None = None, row: dict | None = None) -> dict:
    """Merge one row into the JSON store under an exclusive lock (several invocations may run at
    once) and return every row."""
    store.parent.mkdir(parents=True, exist_ok=True)
    with open(store, "a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        rows = json.loads(text) if text.strip() else {}
        if stem is not None:
            rows[stem] = row
            f.seek(0)
            f.truncate()
            f.write(json.dumps(rows, indent=2, ensure_ascii=False))
        fcntl.flock(f, fcntl.LOCK_UN)
    return rows


def mean_std(values: list[float]) -> str:
    """Fractions in, ``"mean ± sample std"`` in percent out (std 0 for one value, "–" for none)."""
    if not values:
        return "–"
    mean = 100 * statistics.fmean(values)
    std = 100 * statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {std:.2f}"


def add_override_options(parser, table: str) -> None:
    """``-o KEY.PATH=VALUE`` (repeatable, as ``multigrain train -o``), the ``--tag`` naming them, and
    ``--store`` (the JSON rows of ``table``; smoke runs should give their own)."""
    parser.add_argument("--store", default=str(STORES / f"{table}.json"),
                        help="JSON store of the table's rows (default: the tracked one in benchmarks/results/)")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help="override a value of every chosen spec (needs --tag)")
    parser.add_argument("--tag", default=None, help="name of the --override configuration (rows, run directories)")


def check_override_options(parser, args) -> None:
    if bool(args.override) != bool(args.tag):
        parser.error("-o/--override and --tag go together: the tag names the overridden configuration's rows")
    if args.tag and not args.tag.replace("_", "").replace("-", "").isalnum():
        parser.error(f"--tag {args.tag!r}: use letters, digits, '-' and '_' (it names run directories)")


def train_or_reuse(spec: dict, run_dir: Path, tracking_uri: str | None = None, source: str | None = None,
                   track: bool = True) -> dict:
    """One results row's training, through ``multigrain.platform.runs.Run`` as ``multigrain train``
    does: a finished run directory is reused, an interrupted one resumed, a longer run of an earlier
    one extended; logged live to MLflow unless ``track`` is false (``multigrain log`` logs it later)."""
    from multigrain.platform.runs import Run
    from multigrain.platform.tracking import RunLogger

    return Run(spec, run_dir, source).train_or_reuse(logger=RunLogger(tracking_uri) if track else None)
