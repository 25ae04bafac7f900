"""Replace one ``## Section`` of benchmarks/RESULTS.md, leaving the others as they are; record the
results scripts' runs in MLflow as table rows and merge them with the committed portable leaderboard
file; the ``-o``/``--tag``/``--board`` options the results scripts share.

The results tables are generated from MLflow (``results_tables.py``). Their runs live in the store
(``--tracking-uri``) and, for every machine and session, in the tracked file
``benchmarks/results/leaderboard.json`` (``--board``): a results script imports it first (the rows
measured elsewhere, whose run directories are not here), records its own runs, exports the
results runs back into it and rewrites the tables. Several benchmarks write RESULTS.md, possibly
at once: each section rewrite holds an exclusive lock on the file.
"""
from __future__ import annotations

import fcntl
import json
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BOARD = Path(__file__).resolve().parent / "results" / "leaderboard.json"


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


def mean_std(values: list[float]) -> str:
    """Fractions in, ``"mean ± sample std"`` in percent out (std 0 for one value, "–" for none)."""
    if not values:
        return "–"
    mean = 100 * statistics.fmean(values)
    std = 100 * statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {std:.2f}"


def add_override_options(parser, table: str) -> None:
    """``-o KEY.PATH=VALUE`` (repeatable, as ``multigrain train -o``), the ``--tag`` naming them,
    ``--board`` (the portable leaderboard file the ``table`` rows are merged into) and ``--tracking-uri``."""
    parser.add_argument("--board", default=str(BOARD),
                        help="portable leaderboard file merged with the store (default: the tracked one; smoke "
                             "tests give their own, with their own --tracking-uri)")
    parser.add_argument("--tracking-uri", default=None, help="the MLflow store of the runs (default: ./mlruns.db)")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE",
                        help=f"override a value of every chosen spec of {table} (needs --tag)")
    parser.add_argument("--tag", default=None, help="name of the --override configuration (rows, run directories)")


def check_override_options(parser, args) -> None:
    if getattr(args, "max_instances", None) and Path(args.board).resolve() == BOARD:
        parser.error("--max-instances is a smoke test: give it its own --board FILE and --tracking-uri")
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


def open_results(uri: str | None, board: str | Path):
    """The store's client, holding every run of the portable leaderboard file ``board`` (imported
    when missing: rows measured by other machines and sessions)."""
    from multigrain.platform.portable import import_runs, read_board
    from multigrain.platform.tracking import open_store, tracking_uri

    client = open_store(tracking_uri(uri))
    if Path(board).exists():
        added, _ = import_runs(client, read_board(board))
        if added:
            print(f"{board}: imported {added} runs into {tracking_uri(uri)}", flush=True)
    return client


def logged(result: dict, spec: dict, uri: str | None) -> str:
    """The MLflow run id of a finished result: its live-logged run, else one replayed from it."""
    from multigrain.platform.tracking import logged_run, replay

    return logged_run(result, uri) or replay(result, spec, uri)


def tag_row(client, table: str, key: str, run_ids: list[str], tags: dict[str, dict]) -> None:
    """Record the runs ``run_ids`` (in order) as the row ``key`` of the results ``table``: each gets
    ``results_table``, ``results_key``, the row's ids (``results_row``), the time it was recorded
    (``results_time``; the latest recording of a key is its row) and its own ``tags[run_id]``."""
    from mlflow.entities import RunTag

    ids = [client.get_run(r).data.tags.get("portable_id") or r for r in run_ids]
    now = str(int(time.time() * 1000))
    for run_id in run_ids:
        row = {"results_table": table, "results_key": key, "results_row": json.dumps(ids), "results_time": now,
               **tags.get(run_id, {})}
        client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in row.items()], synchronous=True)

