"""Leaderboards from MLflow: finished runs tagged ``leaderboard=true``, one row per group of seeds
(runs whose specs differ only in the seed share a ``seed_group`` tag) shown as mean ± sample std,
ranked within each experiment by the task's headline metric, the paper's number beside ours.
Formats: a terminal table, Markdown, CSV and JSON."""
from __future__ import annotations

import csv
import io
import json
import statistics
import time
from typing import Optional

from multigrain.platform.papers import paper_number
from multigrain.platform.scores import mean_std

#: the metrics a task's leaderboard shows (test split), the run's ``leaderboard_metric`` ranks
HEADLINE = {"ner": ("f1",), "cls": ("accuracy",), "pair": ("accuracy",), "mrc": ("em", "f1"), "mt": ("bleu",)}
COLUMNS = ("rank", "experiment", "name", "model", "encoder", "metric", "ours", "seeds", "paper", "spec hash", "date")
#: metrics shown beside a ranking metric: a board ranked by cased BLEU (WMT) shows the lower-cased one too
BESIDE = {"test_bleu_cased": ("test_bleu",)}
#: the tag whose value a BLEU board shows in its ``signature`` column (the run's sacrebleu signature
#: of the ranking BLEU: reference count, case, tokenizer, version)
SIGNATURE_TAG = "sacrebleu_signature"


def display_name(tags: dict) -> str:
    """``resume_bilstm_big [no_global]``: the spec's name and the configuration tag of a results row."""
    name = tags.get("spec_name") or f"{tags.get('model', '')}-{tags.get('encoder', '')}"
    return f"{name} [{tags['config']}]" if tags.get("config") else name


def encoder_of(rec: dict) -> str:
    """The record's ``encoder`` tag; for runs logged before backbone-only models were tagged with
    their backbone, the backbone/embedder type from the flattened spec in its params."""
    from multigrain.platform.specs import ENCODER_STANDINS

    if rec["tags"].get("encoder"):
        return rec["tags"]["encoder"]
    params = rec.get("params", {})
    return next((params[f"model.{key}.type"] for key in ENCODER_STANDINS if params.get(f"model.{key}.type")), "")


def rank_metric(rec: dict, metric: Optional[str]) -> str:
    return metric or rec["tags"].get("leaderboard_metric") or "test_f1"


def rows(recs: list[dict], metric: Optional[str] = None, group_seeds: bool = True) -> list[dict]:
    """Leaderboard rows of finished leaderboard records (``records.records``): per group the best
    run of each seed, their mean ranks; ``group_seeds`` false: one row per spec hash."""
    groups: dict[tuple, dict[str, dict]] = {}
    for rec in recs:
        tags, key = rec["tags"], rank_metric(rec, metric)
        if key not in rec["metrics"]:
            continue
        ident = tags.get("seed_group") if group_seeds else None
        group = (rec["experiment"], tags.get("evaluated_on", ""), ident or tags.get("spec_hash") or rec["id"])
        seed = (tags.get("seed") or rec["id"]) if group_seeds else ""  # ungrouped: the best run of the spec
        seeds = groups.setdefault(group, {})
        if seed not in seeds or rec["metrics"][key] > seeds[seed]["metrics"][key]:
            seeds[seed] = rec
    out = []
    for (experiment, _, _), seeds in groups.items():
        runs = [seeds[s] for s in sorted(seeds, key=lambda s: (len(s), s))]
        key = rank_metric(runs[0], metric)
        values = [r["metrics"][key] for r in runs]
        best = max(runs, key=lambda r: r["metrics"][key])
        tags = best["tags"]
        task = experiment.split("/", 1)[0]
        shown = [f"test_{m}" for m in HEADLINE.get(task, ())]
        beside = [k for k in BESIDE.get(key, ()) if any(k in r["metrics"] for r in runs)]
        shown = shown if key in shown else [key, *beside]
        signatures = dict.fromkeys(r["tags"][SIGNATURE_TAG] for r in runs if r["tags"].get(SIGNATURE_TAG))
        cells = [mean_std(k, [r["metrics"][k] for r in runs if k in r["metrics"]]) for k in shown
                 if any(k in r["metrics"] for r in runs)]
        paper = None if tags.get("config") else paper_number(experiment, tags.get("spec_name", ""))
        out.append({"experiment": experiment, "name": display_name(tags), "model": tags.get("model", ""),
                    "encoder": encoder_of(best), "metric": key if len(shown) == 1 else " / ".join(shown),
                    "value": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
                    "ours": " / ".join(cells), "seeds": len(runs), "values": values, "paper": paper or "",
                    "spec_hash": tags.get("spec_hash", ""), "run_id": best["run_id"],
                    "run_ids": [r["run_id"] for r in runs],
                    "date": time.strftime("%Y-%m-%d %H:%M", time.localtime((best["start_time"] or 0) / 1000)),
                    "git_commit": tags.get("git_commit", ""), "signature": " ; ".join(signatures)})
    out.sort(key=lambda r: (r["experiment"], -r["value"], r["name"]))
    rank, last = 0, None
    for row in out:
        rank = rank + 1 if row["experiment"] == last else 1
        last = row["experiment"]
        row["rank"] = rank
    return out


def leaderboard(task: Optional[str], uri: Optional[str] = None, metric: Optional[str] = None,
                group_seeds: bool = True) -> list[dict]:
    """The leaderboard of ``task`` (an experiment such as ``ner/resume`` or a task such as ``ner``;
    None: every experiment). A missing store has no rows (and is not created)."""
    from multigrain.platform.records import FINISHED_BOARD, records
    from multigrain.platform.tracking import open_store, tracking_uri

    client = open_store(tracking_uri(uri), create=False)
    if client is None:
        return []
    recs = records(client, task, FINISHED_BOARD)
    check_metric(metric, recs, task)
    return rows(recs, metric, group_seeds)


def check_metric(metric: Optional[str], recs: list[dict], task: Optional[str]) -> None:
    """A ranking ``metric`` that none of the records has is an error naming the metrics they have."""
    from multigrain.platform.errors import ConfigurationError, did_you_mean

    if not metric or not recs or any(metric in r["metrics"] for r in recs):
        return
    names = sorted({k for r in recs for k in r["metrics"]})
    raise ConfigurationError(f"--metric {metric}: no finished leaderboard run of {task or 'the store'} has this "
                             f"metric{did_you_mean(metric, names)}; their metrics: {', '.join(names)}")


def columns(board: list[dict]) -> tuple[str, ...]:
    """``COLUMNS``, and ``signature`` last when a row has one (a BLEU board)."""
    return COLUMNS + (("signature",) if any(r.get("signature") for r in board) else ())


def _cells(row: dict, signature: bool = False) -> list[str]:
    return [str(row["rank"]), row["experiment"], row["name"], row["model"], row["encoder"], row["metric"],
            row["ours"], str(row["seeds"]), row["paper"] or "–", row["spec_hash"][:12], row["date"],
            *([row.get("signature") or "–"] if signature else [])]


def markdown(board: list[dict]) -> str:
    cols = columns(board)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    # a signature's '|' would end the cell
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r, len(cols) > len(COLUMNS))) + " |"
              for r in board]
    return "\n".join(lines) + "\n"


def as_csv(board: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    cols = columns(board)
    writer.writerow([*cols, "value", "std", "run id"])
    for r in board:
        signature = [r.get("signature", "")] if len(cols) > len(COLUMNS) else []
        writer.writerow([*_cells(r)[:-2], r["spec_hash"], r["date"], *signature, r["value"],
                         "" if r["std"] is None else r["std"], r["run_id"]])
    return buf.getvalue()


def render(title: str, board: list[dict], fmt: str = "table", console=None) -> None:
    """Print the leaderboard in ``fmt`` (table, md, csv or json)."""
    import sys

    if fmt == "json":
        print(json.dumps(board, indent=2, ensure_ascii=False))
        return
    if fmt in ("md", "csv"):
        sys.stdout.write(markdown(board) if fmt == "md" else as_csv(board))
        return
    from rich.console import Console
    from rich.table import Table

    console = console or (Console() if sys.stdout.isatty() else Console(width=200))
    if not board:
        console.print(f"leaderboard {title}: no finished runs tagged leaderboard=true", markup=False)
        return
    from rich.markup import escape  # '[small]' in a name is text, not Rich markup

    table = Table(title=f"leaderboard: {escape(title)}")
    cols = columns(board)
    for col in cols:
        table.add_column(col, justify="right" if col in ("rank", "ours", "seeds") else "left")
    for r in board:
        table.add_row(*(escape(cell) for cell in _cells(r, len(cols) > len(COLUMNS))))
    console.print(table)
