"""``multigrain suite SUITE --check [BOARD]``: each entry's finished runs against a committed
leaderboard export and the papers' numbers: "reproduced" (inside the committed mean ± 2 sd, or
± ``ONE_SEED_TOLERANCE`` for one committed seed), "differs", "missing" (no finished run) or "new"
(no committed row)."""
from __future__ import annotations

import statistics
from pathlib import Path

from multigrain.platform.suite import SuiteRun

#: one committed seed: a run within this many points (fractions: 0.005) reproduces it
ONE_SEED_TOLERANCE = 0.005


def check(runs: list[SuiteRun], board_recs: list[dict]) -> list[dict]:
    """One verdict per entry (``entry`` name, experiment): reproduced / differs / missing / new,
    with our mean, the committed mean ± sd and seed count, and the paper's number."""
    from multigrain.platform.experiment import identity
    from multigrain.platform.leaderboard import rows
    from multigrain.platform.papers import paper_number
    from multigrain.platform.tracking import experiment_name

    recs = [{"run_id": rec.get("id"), **rec} for rec in board_recs]
    committed = {(r["experiment"], r["name"]): r for r in rows(recs)}
    by_entry: dict[str, list[SuiteRun]] = {}
    for r in runs:
        by_entry.setdefault(r.entry, []).append(r)
    out = []
    for entry, members in by_entry.items():
        experiment = experiment_name(identity(members[0].spec))
        results = [m.result() for m in members]
        values, metric = [], None
        for res in results:
            scored = _test_scores(res, experiment)
            if scored:
                metric = scored[1]
                if metric in scored[0]:
                    values.append(scored[0][metric])
        row = {"entry": entry, "experiment": experiment, "metric": f"test_{metric}" if metric else None,
               "ours": statistics.fmean(values) if values else None,
               "ours_sd": statistics.stdev(values) if len(values) > 1 else None, "seeds": len(values),
               "paper": paper_number(experiment, Path(members[0].spec_path).name.split(".")[0]) or ""}
        board = committed.get((experiment, entry))
        if board:
            row.update(committed_mean=board["value"], committed_sd=board.get("std"), committed_seeds=board["seeds"])
        if not values:
            row["verdict"] = "missing"
        elif not board:
            row["verdict"] = "new"
        else:
            sd = board.get("std")
            tolerance = 2 * sd if sd else ONE_SEED_TOLERANCE
            row["tolerance"] = tolerance
            row["verdict"] = "reproduced" if abs(row["ours"] - board["value"]) <= tolerance + 1e-12 else "differs"
        out.append(row)
    return out


def check_lines(verdicts: list[dict]) -> list[str]:
    def pct(v):
        return "-" if v is None else f"{100 * v:.2f}"

    lines = []
    for v in verdicts:
        ours = f"{pct(v['ours'])}" + (f" ± {pct(v['ours_sd'])}" if v.get("ours_sd") is not None else "")
        board = (f"{pct(v['committed_mean'])}" + (f" ± {pct(v['committed_sd'])}" if v.get("committed_sd") else "")
                 + f" ({v['committed_seeds']} seeds)") if "committed_mean" in v else "-"
        lines.append(f"{v['verdict']:<10} {v['experiment']:<18} {v['entry']:<36} ours {ours} ({v['seeds']} seeds)"
                     f"  committed {board}" + (f"  paper {v['paper']}" if v["paper"] else ""))
    counts = {k: sum(v["verdict"] == k for v in verdicts) for k in ("reproduced", "differs", "missing", "new")}
    lines.append(", ".join(f"{n} {k}" for k, n in counts.items()))
    return lines


def _test_scores(result: dict | None, experiment: str) -> tuple[dict, str] | None:
    """(test metrics, the ranked one) of a finished run: its test set's, else those of its named
    test set of the experiment's dataset (``test_sets.tvsub`` for ``mt/tvsub``: a translation spec
    scores its test sets there)."""
    if not result:
        return None
    if result.get("test"):
        return result["test"], result.get("leaderboard_metric") or "f1"
    own = (result.get("test_sets") or {}).get(experiment.split("/", 1)[-1])
    if own and own.get("metrics"):
        return own["metrics"], own.get("leaderboard_metric") or result.get("leaderboard_metric") or "f1"
    return None
