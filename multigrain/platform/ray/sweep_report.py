"""A sweep's results: grid points ranked by their mean validation metric over seeds, the live
table of trials and the summary table."""
from __future__ import annotations

import statistics
from typing import Optional

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
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=160)
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

