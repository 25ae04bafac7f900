"""How a score is shown in every table (leaderboard, run description, sweep summary): fractions as
percent, points (BLEU, chrF) as they are. Imports nothing of the platform, so any module may use it."""
from __future__ import annotations

import statistics
from typing import Optional


#: metrics that are points on a 0-100 scale already (sacrebleu's BLEU and chrF): never multiplied,
#: also when an untrained model scores below 1
POINT_METRICS = ("bleu", "bleu_cased", "chrf")


def percent_scale(metric: str, values: list[float]) -> float:
    """100 for a fraction (F1, accuracy, EM in [0, 1]), 1 for points (``POINT_METRICS``, matched on the
    name's last part: ``test_tvsub_bleu``) and for any other metric with values above 1."""
    name = metric.rsplit("/", 1)[-1]
    if any(name == m or name.endswith("_" + m) for m in POINT_METRICS):
        return 1.0
    return 100.0 if max(values) <= 1.0 else 1.0


def shown(metric: str, value: float) -> str:
    """One score as the tables show it: percent for fractions, points as they are; two decimals."""
    return f"{percent_scale(metric, [value]) * value:.2f}"


def mean_std(metric: str, values: list[float]) -> str:
    """``93.65 ± 0.49`` (sample std) over several values; the value alone for one."""
    if len(values) == 1:
        return shown(metric, values[0])
    scale = percent_scale(metric, values)
    return f"{scale * statistics.fmean(values):.2f} ± {scale * statistics.stdev(values):.2f}"


def given_mean_std(metric: str, mean: float, std: Optional[float]) -> str:
    """``mean_std`` of a mean and sample std known without their values (a row that stands for
    several seeds whose values were not kept)."""
    scale = percent_scale(metric, [mean])
    return f"{scale * mean:.2f}" if std is None else f"{scale * mean:.2f} ± {scale * std:.2f}"
