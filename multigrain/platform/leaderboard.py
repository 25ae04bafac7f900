"""Leaderboards from MLflow: finished runs tagged ``leaderboard=true``, one row per group of seeds
(runs whose specs differ only in the seed share a ``seed_group`` tag) shown as mean ± sample std,
ranked within each experiment by the task's headline metric, the paper's number beside ours.
Formats: a terminal table, Markdown, CSV and JSON; every one carries every column.

What a row says about how it was made (issue 42):

- a seed is one run: of several finished runs of one seed in a group, the one that finished last
  counts (a seed run again replaces its earlier run; no best-of);
- ``spec hash`` is the run's current one (an extended run is retagged, ``provenance``); JSON and
  CSV keep the earlier ones (``spec_hash_history``); ``epochs`` the epochs trained (a range over
  seeds); ``date`` when the last of its runs ended (its last epoch);
- ``scored on``: ``test``, ``test, first N`` (the test reader's ``max_instances``: a subset, hidden
  by ``--full-test-only``) or ``validation`` (a run not evaluated on test, e.g. pre-training: ranked
  by the best validation value of its metric, ``best_validation_<metric>``);
- the name carries the ext-vars the spec was resolved with (``bq_mwa variant=mwa``);
- a row migrated with only its mean and std over N seeds (tags ``summary_seeds``, ``summary_std``)
  shows N seeds and that std.
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
import time
from typing import Optional

from multigrain.platform.papers import paper_number
from multigrain.platform.scores import given_mean_std, mean_std

#: the metrics a task's leaderboard shows (test split), the run's ``leaderboard_metric`` ranks
HEADLINE = {"ner": ("f1",), "cls": ("accuracy",), "pair": ("accuracy",), "mrc": ("em", "f1"), "mt": ("bleu",)}
COLUMNS = ("rank", "experiment", "name", "model", "encoder", "metric", "scored on", "ours", "seeds", "epochs",
           "paper", "spec hash", "date")
#: metrics shown beside a ranking metric: a board ranked by cased BLEU (WMT) shows the lower-cased one too
BESIDE = {"test_bleu_cased": ("test_bleu",)}
#: the tag whose value a BLEU board shows in its ``signature`` column (the run's sacrebleu signature
#: of the ranking BLEU: reference count, case, tokenizer, version)
SIGNATURE_TAG = "sacrebleu_signature"
VALIDATION_PREFIX = "best_validation_"


def display_name(tags: dict) -> str:
    """``resume_bilstm_big [no_global]``: the spec's name, the ext-vars it was resolved with and the
    configuration tag of a results row (``bq_mwa variant=mwa [small]``)."""
    from multigrain.platform.provenance import ext_vars_label, ext_vars_of_tags

    name = tags.get("spec_name") or f"{tags.get('model', '')}-{tags.get('encoder', '')}"
    name = " ".join(filter(None, [name, ext_vars_label(ext_vars_of_tags(tags))]))
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


def ranked_key(rec: dict, metric: Optional[str]) -> Optional[str]:
    """The metric key that ranks ``rec``: its leaderboard metric; for a run never evaluated on test
    (no ``test_*`` metric: pre-training) and no ``--metric`` given, its best validation value."""
    key = rank_metric(rec, metric)
    if key in rec["metrics"]:
        return key
    if metric is None and key.startswith("test_") and not any(k.startswith("test_") for k in rec["metrics"]):
        fallback = VALIDATION_PREFIX + key[len("test_"):]
        return fallback if fallback in rec["metrics"] else None
    return None


def _int(value) -> Optional[int]:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def reader_limit(params: dict, split: str, test_set: str = "") -> Optional[int]:
    """The ``max_instances`` of the reader that read ``split`` (``test`` or ``validation``) for a
    run with flattened spec ``params``: a named test set's own reader, else the spec's reader of
    that split, falling back as ``Experiment.reader_for`` does."""
    if test_set and f"test_sets.{test_set}.reader.type" in params:
        return _int(params.get(f"test_sets.{test_set}.reader.max_instances"))
    order = {"test": ("test_dataset_reader", "validation_dataset_reader"),
             "validation": ("validation_dataset_reader",)}[split]
    for reader in (*order, "dataset_reader"):
        if f"{reader}.type" in params or reader == "dataset_reader":
            return _int(params.get(f"{reader}.max_instances"))
    return None


def scored_on(rec: dict, key: str) -> tuple[str, Optional[int]]:
    """(``test`` / ``validation``, the reader's ``max_instances`` or None) of a record's ranked score."""
    from multigrain.platform.provenance import current_params

    split = "validation" if key.startswith(VALIDATION_PREFIX) else "test"
    params = current_params(rec.get("params", {}), rec["tags"])
    return split, reader_limit(params, split, rec["tags"].get("test_set", ""))


def epochs_of(rec: dict) -> Optional[int]:
    """The epochs the run trained (``epochs_completed``), else its spec's ``num_epochs``."""
    if isinstance(rec["metrics"].get("epochs_completed"), (int, float)):
        return int(rec["metrics"]["epochs_completed"])
    return num_epochs_of(rec)


def _summary(rec: dict, key: str) -> tuple[int, Optional[float]]:
    """(seeds, std of ``key``) a migrated summary row stands for (tags ``summary_seeds``, ``summary_std``)."""
    seeds = _int(rec["tags"].get("summary_seeds")) or 1
    try:
        std = json.loads(rec["tags"].get("summary_std") or "{}").get(key)
    except (ValueError, AttributeError):
        std = None
    return seeds, (float(std) if isinstance(std, (int, float)) and seeds > 1 else None)


def _ended(rec: dict) -> int:
    return rec.get("end_time") or rec.get("start_time") or 0


def rows(recs: list[dict], metric: Optional[str] = None, group_seeds: bool = True,
         full_test_only: bool = False) -> list[dict]:
    """Leaderboard rows of finished leaderboard records (``records.records``): per group the run of
    each seed that finished last, their mean ranks; ``group_seeds`` false: one row per spec hash
    (its run that finished last); ``full_test_only``: only rows scored on a whole test set."""
    groups: dict[tuple, dict[str, dict]] = {}
    for rec in recs:
        tags, key = rec["tags"], ranked_key(rec, metric)
        if key is None:
            continue
        split, limit = scored_on(rec, key)
        if full_test_only and (split != "test" or limit is not None):
            continue
        ident = tags.get("seed_group") if group_seeds else None
        group = (rec["experiment"], tags.get("evaluated_on", ""), ident or tags.get("spec_hash") or rec["id"], key)
        seed = (tags.get("seed") or rec["id"]) if group_seeds else ""
        seeds = groups.setdefault(group, {})
        if seed not in seeds or (_ended(rec), rec["id"]) > (_ended(seeds[seed]), seeds[seed]["id"]):
            seeds[seed] = rec
    out = [_row(experiment, key, [seeds[s] for s in sorted(seeds, key=lambda s: (len(s), s))])
           for (experiment, _, _, key), seeds in groups.items()]
    out.sort(key=lambda r: (r["experiment"], math.isnan(r["value"]), -r["value"] if not math.isnan(r["value"]) else 0,
                            r["name"]))  # a NaN score (a diverged run) ranks last
    rank, last = 0, None
    for row in out:
        rank = rank + 1 if row["experiment"] == last else 1
        last = row["experiment"]
        row["rank"] = rank
    return out


def _span(numbers: list[int]):
    """``8`` (a number), or ``"11–16"`` over seeds that trained different numbers of epochs; None when
    unknown."""
    if not numbers:
        return None
    return numbers[0] if numbers[0] == numbers[-1] else f"{numbers[0]}–{numbers[-1]}"


def num_epochs_of(rec: dict) -> Optional[int]:
    """The spec's ``trainer.num_epochs`` as it is now (an extended run's larger one)."""
    from multigrain.platform.provenance import current_params

    return _int(current_params(rec.get("params", {}), rec["tags"]).get("trainer.num_epochs")) or \
        _int(rec["tags"].get("num_epochs"))


def _row(experiment: str, key: str, runs: list[dict]) -> dict:
    from multigrain.platform.provenance import hash_history

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
    seeds, std = len(runs), statistics.stdev(values) if len(values) > 1 else None
    if len(runs) == 1 and _summary(best, key)[0] > 1:  # one row standing for N seeds whose values are lost
        seeds, std = _summary(best, key)
        cells = [given_mean_std(key, values[0], std)]
        shown = [key]
    split, limit = scored_on(best, key)
    where = split if limit is None else f"{split}, first {limit}"
    epochs = sorted({e for e in map(epochs_of, runs) if e is not None})
    paper = None if tags.get("config") else paper_number(experiment, tags.get("spec_name", ""))
    ended = max(_ended(r) for r in runs)
    return {"experiment": experiment, "name": display_name(tags), "model": tags.get("model", ""),
            "encoder": encoder_of(best), "metric": key if len(shown) == 1 else " / ".join(shown),
            "scored_on": where, "subset": limit is not None, "max_instances": limit,
            "value": statistics.fmean(values), "std": std, "ours": " / ".join(cells), "seeds": seeds,
            "values": values, "paper": paper or "", "epochs": _span(epochs),
            "num_epochs": _span(sorted({e for e in map(num_epochs_of, runs) if e is not None})),
            "spec_hash": tags.get("spec_hash", ""), "spec_hash_history": hash_history(tags),
            "run_id": best["run_id"], "run_ids": [r["run_id"] for r in runs],
            "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(ended / 1000)),
            "git_commit": tags.get("git_commit", ""), "signature": " ; ".join(signatures)}


def leaderboard(task: Optional[str], uri: Optional[str] = None, metric: Optional[str] = None,
                group_seeds: bool = True, full_test_only: bool = False) -> list[dict]:
    """The leaderboard of ``task`` (an experiment such as ``ner/resume`` or a task such as ``ner``;
    None: every experiment). A missing store has no rows (and is not created)."""
    from multigrain.platform.records import FINISHED_BOARD, records
    from multigrain.platform.tracking import open_store, tracking_uri

    client = open_store(tracking_uri(uri), create=False)
    if client is None:
        return []
    recs = records(client, task, FINISHED_BOARD)
    check_metric(metric, recs, task)
    return rows(recs, metric, group_seeds, full_test_only)


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


def _cells(row: dict, signature: bool = False, full_hash: bool = False) -> list[str]:
    return [str(row["rank"]), row["experiment"], row["name"], row["model"], row["encoder"], row["metric"],
            row.get("scored_on") or "test", row["ours"], str(row["seeds"]), str(row.get("epochs") or "–"),
            row["paper"] or "–", row["spec_hash"] if full_hash else row["spec_hash"][:12], row["date"],
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
    writer.writerow([*cols, "value", "std", "run id", "spec hash history"])
    for r in board:
        writer.writerow([*_cells(r, len(cols) > len(COLUMNS), full_hash=True), r["value"],
                         "" if r["std"] is None else r["std"], r["run_id"], " ".join(r.get("spec_hash_history", []))])
    return buf.getvalue()


def _finite(value):
    """``value`` with every float that is NaN or infinite, at any depth, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def render(title: str, board: list[dict], fmt: str = "table", console=None) -> None:
    """Print the leaderboard in ``fmt`` (table, md, csv or json)."""
    import sys

    if fmt == "json":  # standard JSON: a NaN or infinite score is null
        print(json.dumps(_finite(board), indent=2, ensure_ascii=False, allow_nan=False))
        return
    if fmt in ("md", "csv"):
        sys.stdout.write(markdown(board) if fmt == "md" else as_csv(board))
        return
    from multigrain.platform.console import output_console
    from rich.table import Table

    console = console or output_console(200)
    if not board:
        console.print(f"leaderboard {title}: no finished runs tagged leaderboard=true", markup=False)
        return
    from rich.markup import escape  # '[small]' in a name is text, not Rich markup

    table = Table(title=f"leaderboard: {escape(title)}")
    cols = columns(board)
    for col in cols:
        table.add_column(col, justify="right" if col in ("rank", "ours", "seeds", "epochs") else "left")
    for r in board:
        table.add_row(*(escape(cell) for cell in _cells(r, len(cols) > len(COLUMNS))))
    console.print(table)
