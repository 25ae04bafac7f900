"""A sweep's results: grid points ranked by their mean validation metric over seeds, the live
table of trials and the summary table."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Optional

from multigrain.platform.ray.sweep import Trial
from multigrain.platform.scores import percent_scale


def _metric_name(trials: list[Trial]) -> tuple[str, float]:
    from multigrain.platform.training import trainer_settings

    settings = trainer_settings(trials[0].spec)
    return settings.metric_name, settings.metric_sign


def _mean_std(values: list[float]) -> tuple[Optional[float], Optional[float]]:
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize(trials: list[Trial]) -> list[dict]:
    """Grid points ranked by mean validation metric over seeds (best first), with the std and
    the mean/std of every test metric (loss aside)."""
    name, sign = _metric_name(trials)
    groups: dict[tuple, list[Trial]] = {}
    for t in trials:
        groups.setdefault(t.point, []).append(t)
    rows = []
    for point, members in groups.items():
        done = [t for t in members if t.result and t.result.get("validation") is not None]
        vals = [t.result["validation"][name] for t in done if name in t.result["validation"]]
        mean, std = _mean_std(vals)
        test_keys = sorted({k for t in done for k in (t.result.get("test") or {}) if k != "loss"})
        test = {k: _mean_std([t.result["test"][k] for t in done if k in (t.result.get("test") or {})])
                for k in test_keys}
        rows.append({"point": dict(point), "label": members[0].point_label, "seeds": len(members),
                     "completed": len(vals), "metric": name, "mean": mean, "std": std, "test": test,
                     "spec_hashes": [t.spec_hash for t in members]})
    rows.sort(key=lambda r: (r["mean"] is None, -sign * (r["mean"] if r["mean"] is not None else 0.0)))
    for rank, row in enumerate(rows, 1):
        row["rank"] = rank
    return rows


def _fmt(metric: str, mean: Optional[float], std: Optional[float]) -> str:
    if mean is None:
        return "-"
    scale = percent_scale(metric, [abs(mean), std or 0.0])
    return f"{scale * mean:.2f} ± {scale * (std or 0.0):.2f}"


def trials_table(trials: list[Trial]):
    from rich.table import Table

    name, _ = _metric_name(trials)
    table = Table(title="sweep trials")
    for col in ("#", "trial", "state", "try", "epoch", f"dev {name}", "spec hash"):
        table.add_column(col, justify="right" if col in ("#", "try", "epoch", f"dev {name}") else "left")
    for t in trials:
        metric = t.metric
        if t.result and t.result.get("validation"):
            metric = t.result["validation"].get(name, metric)
        table.add_row(str(t.index), t.label, t.state + (" !" if t.error else ""), str(t.attempts or ""),
                      str(t.epoch or ""), "-" if metric is None else f"{metric:.4f}", t.spec_hash[:8])
    return table


def print_summary(trials: list[Trial], console=None) -> None:
    from multigrain.platform.console import output_console
    from rich.table import Table

    console = console or output_console(160)
    rows = summarize(trials)
    test_keys = sorted({k for r in rows for k in r["test"]})
    table = Table(title=f"sweep summary: mean ± std over seeds, ranked by dev {rows[0]['metric'] if rows else ''}")
    for col in ("rank", "grid point", "seeds", f"dev {rows[0]['metric'] if rows else ''}", *[f"test {k}" for k in test_keys]):
        table.add_column(col, justify="left" if col == "grid point" else "right")
    for r in rows:
        table.add_row(str(r["rank"]), r["label"], f"{r['completed']}/{r['seeds']}",
                      _fmt(r["metric"], r["mean"], r["std"]),
                      *[_fmt(k, *r["test"].get(k, (None, None))) for k in test_keys])
    console.print(table)
    for t in trials:
        if t.error:
            console.print(f"[{t.label}] {t.state}: {t.error}", markup=False, highlight=False)



#: the longest time between two status lines without the live table (seconds)
STATUS_EVERY = 25.0


class QuietReport:
    """The sweep without a live table (``CI=true``): a line per trial when it ends; a status line
    (finished / running / queued) when the counts change or every ``STATUS_EVERY`` seconds; under
    it each running trial's latest progress line from its worker, once each. Call it with the
    trials after every round of the sweep."""

    def __init__(self, print_line: Callable[[str], None] = print, clock: Callable[[], float] = time.monotonic):
        self.print_line, self.clock = print_line, clock
        self.started = clock()
        self.last_status, self.last_time = "", None
        self.ended: set[int] = set()
        self.shown: dict[int, str] = {}

    def __call__(self, trials: list[Trial]) -> None:
        for t in trials:
            if t.state in ("FINISHED", "FAILED", "STOPPED") and t.index not in self.ended:
                self.ended.add(t.index)
                self.print_line(f"[{t.index}] {t.label}: {t.state}" + (f" ({t.error})" if t.error else ""))
        running = [t for t in trials if t.state in ("RUNNING", "RETRYING")]
        status = (f"{len(self.ended)}/{len(trials)} ended, {len(running)} running, "
                  f"{sum(t.state in ('PENDING', 'QUEUED') for t in trials)} queued")
        now = self.clock()
        if status != self.last_status or self.last_time is None or now - self.last_time >= STATUS_EVERY:
            self.print_line(f"sweep [{(now - self.started) / 60:.1f} min] {status}")
            self.last_status, self.last_time = status, now
        for t in running:
            if t.progress and self.shown.get(t.index) != t.progress:
                self.shown[t.index] = t.progress
                self.print_line(f"  [{t.index}] {t.label}: {t.progress}")
