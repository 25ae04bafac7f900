"""Replace one ``## Section`` of benchmarks/RESULTS.md, leaving the others as they are; record a
suite's finished runs (``multigrain suite``) in MLflow as results-table rows and merge them with the
committed portable leaderboard file.

The results tables are generated from MLflow (``results_tables.py``). Their runs live in the store
(``--tracking-uri``) and, for every machine and session, in the tracked file
``benchmarks/results/leaderboard.json`` (``--board``): ``results_tables.py --suite SUITE`` imports
it first (the rows measured elsewhere, whose run directories are not here), records the suite's
runs as rows (``record_suite``), exports the results runs back into it and rewrites the tables.
Several benchmarks write RESULTS.md, possibly at once: each section rewrite holds an exclusive lock
on the file.
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


def train_or_reuse(spec: dict, run_dir: Path, tracking_uri: str | None = None, source: str | None = None,
                   track: bool = True) -> dict:
    """A benchmark's own training (``lattice_bert.py``), through ``multigrain.platform.runs.Run`` as
    ``multigrain train`` does: a finished run directory is reused, an interrupted one resumed, a longer run of an earlier
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


#: the results table of a run's task (``results_tables.py``); other tasks have tables of their own
TABLES = {"ner": "ner", "cls": "sentence", "pair": "sentence", "mrc": "sentence"}


def record_suite(client, suite: str | Path, only: str | list[str] | None = None, runs_dir: str = "runs",
                 uri: str | None = None, print_line=print) -> dict[str, int]:
    """Record the finished runs of a suite as results rows: one row per entry and configuration
    ``only`` selects, ``<spec stem>[<tag>]``, holding the runs of its seeds that have finished (in their
    run directories here, else in the store: ``logged_runs``, which also tags them as suite runs);
    recorded now, it replaces an earlier row of that key. An entry the selected ones only read
    (``run_of``) keeps its row. Returns key -> seeds recorded."""
    from multigrain.platform.experiment import identity
    from multigrain.platform.ray.suite import logged_runs
    from multigrain.platform.suite import load_suite, plan, selected_entries

    loaded = load_suite(suite)
    runs = plan(suite, loaded, runs_dir, only, check_data_paths=False)
    selected = selected_entries(suite, loaded, only)
    runs = [r for r in runs if r.entry in selected]
    ids = logged_runs(runs, uri, print_line)
    entries: dict[str, list] = {}
    for r in runs:
        entries.setdefault(r.entry, []).append(r)
    recorded = {}
    for entry, members in entries.items():
        task, stem = identity(members[0].spec)["task"], Path(members[0].spec_path).name.split(".")[0]
        key = f"{stem}[{members[0].tag}]" if members[0].tag else stem
        done = [ids[m.index] for m in members if m.index in ids]
        if task not in TABLES or not done:
            print_line(f"{entry}: " + (f"no results table of task {task}" if done else "no finished run") + "; left out")
            continue
        tag_row(client, TABLES[task], key, done, {})
        recorded[key] = len(done)
        print_line(f"{key}: {len(done)} of {len(members)} seeds recorded in the {TABLES[task]} table")
    return recorded
