"""What a finished run shows in the MLflow UI besides its metrics: learning curves (PNG and the
data as JSON), the per-type report (NER), a confusion matrix (classification), a sample of test
predictions, and the run's description. Made from the run's result dict (``run_training.train_run``'s, or a
``metrics.json`` copied from another machine), so a replayed run gets the same files; matplotlib
draws off-screen (Agg)."""
from __future__ import annotations

import json
import math
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from multigrain.platform.errors import PlotWarning
from multigrain.platform.scores import shown

#: the metric keys of a history record that are not curves
NOT_CURVES = {"epoch", "lr", "seconds"}
#: fonts with Chinese glyphs, the first installed one drawn before matplotlib's default
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "SimHei", "Microsoft YaHei", "PingFang SC", "AR PL UMing CN")
#: the largest magnitude a curve is drawn at: matplotlib's autoscaling overflows on finite values
#: near the float maximum (1e308: "arange: cannot compute length"); larger ones are drawn here
DRAWN_MAX = 1e300


def curves(history: list[dict]) -> dict[str, list[list[float]]]:
    """``{"train_loss": [[epoch, value], ...], "validation_f1": [...], ...}`` of a run's history."""
    out: dict[str, list[list[float]]] = {}
    for record in history:
        for key, value in record.items():
            if key in NOT_CURVES or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            out.setdefault(key, []).append([record["epoch"], float(value)])
    return out


def _figure(panels: int):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    fig = Figure(figsize=(5.5 * panels, 4), dpi=100)
    return fig, [fig.add_subplot(1, panels, i + 1) for i in range(panels)]


def _cjk_font() -> Optional[str]:
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


@contextmanager
def _drawing(path: Path):
    """Draws with an installed Chinese font first (labels are run names and tag sets); where none has a
    character's glyph, one warning for the whole figure instead of matplotlib's one per character."""
    import matplotlib

    cjk = _cjk_font()
    families = ([cjk] if cjk else []) + list(matplotlib.rcParams["font.sans-serif"])
    with matplotlib.rc_context({"font.sans-serif": families}), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    missing = sorted({str(w.message) for w in caught if "missing from font" in str(w.message)})
    for w in caught:
        if "missing from font" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        warnings.warn(f"{path.name}: no installed font has the glyphs of {len(missing)} characters of its labels, "
                      "drawn as boxes (install a Chinese font, e.g. Debian's fonts-noto-cjk)", PlotWarning,
                      stacklevel=3)


def drawable(points: list[list[float]]) -> tuple[list[float], list[float], bool]:
    """The epochs and values of a curve as drawn: a finite value beyond ±``DRAWN_MAX`` at ±``DRAWN_MAX``
    (NaN and infinities stay: matplotlib leaves them out); and whether any was cut."""
    xs = [float(x) for x, _ in points]
    ys = [max(-DRAWN_MAX, min(DRAWN_MAX, float(y))) if math.isfinite(y) else float(y) for _, y in points]
    return xs, ys, any(math.isfinite(y) and abs(y) > DRAWN_MAX for _, y in points)


def plot_curves(series: dict[str, dict[str, list[list[float]]]], path: Path, dev_metric: Optional[str] = None) -> None:
    """Training loss and the dev metric per epoch, one line per run (``series``: label -> curves),
    written as a PNG to ``path``. Values beyond ±``DRAWN_MAX`` are drawn there, and the panel says so."""
    with _drawing(path):
        _plot_curves(series, path, dev_metric)


def _plot_curves(series: dict[str, dict[str, list[list[float]]]], path: Path, dev_metric: Optional[str]) -> None:
    fig, (loss_ax, dev_ax) = _figure(2)
    cut = set()
    for label, run_curves in series.items():
        if "train_loss" in run_curves:
            xs, ys, clipped = drawable(run_curves["train_loss"])
            loss_ax.plot(xs, ys, marker="o", label=label)
            cut |= {loss_ax} if clipped else set()
        key = f"validation_{dev_metric}" if dev_metric and f"validation_{dev_metric}" in run_curves else next(
            (k for k in sorted(run_curves) if k.startswith("validation_") and k != "validation_loss"), None)
        if key:
            xs, ys, clipped = drawable(run_curves[key])
            cut |= {dev_ax} if clipped else set()
            dev_ax.plot(xs, ys, marker="o", label=f"{label} ({key[len('validation_'):]})" if len(series) > 1 else None)
            dev_ax.set_ylabel(key.replace("_", " "))
    loss_ax.set_title("training loss")
    dev_ax.set_title("dev metric")
    from matplotlib.ticker import MaxNLocator

    for ax in (loss_ax, dev_ax):
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        if len(series) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        if ax in cut:
            ax.set_title(f"{ax.get_title()}\n(values beyond ±{DRAWN_MAX:g} drawn at ±{DRAWN_MAX:g})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png")


def plot_confusion(confusion: dict, path: Path) -> None:
    """``{"labels": [...], "matrix": [[gold x predicted counts]]}`` as a PNG heat map."""
    with _drawing(path):
        _plot_confusion(confusion, path)


def _plot_confusion(confusion: dict, path: Path) -> None:
    labels, matrix = confusion["labels"], confusion["matrix"]
    fig, (ax,) = _figure(1)
    ax.imshow([[float(n) for n in row] for row in matrix], cmap="Blues")  # a count past int64 is no numpy int
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    top = max((max(row) for row in matrix if row), default=0)
    for i, row in enumerate(matrix):
        for j, n in enumerate(row):
            ax.text(j, i, str(n) if abs(n) < 1e9 else f"{n:.2e}", ha="center", va="center",  # 10**300: 301 digits
                    color="white" if n > top / 2 else "black", fontsize=8)
    ax.set_title("test confusion matrix")
    fig.tight_layout()
    fig.savefig(path, format="png")


def write_run_artifacts(result: dict, folder: Path) -> list[Path]:
    """The artifact files of a finished run's ``result``, written into ``folder``."""
    written = []

    def dump(name: str, data) -> None:
        path = folder / name
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        written.append(path)

    run_curves = curves(result.get("history") or [])
    if run_curves:
        dump("learning_curves.json", run_curves)
        plot_curves({"run": run_curves}, folder / "learning_curves.png", result.get("leaderboard_metric"))
        written.append(folder / "learning_curves.png")
    if result.get("test_report"):
        dump("test_report.json", result["test_report"])
    confusion = result.get("test_confusion")
    if confusion and confusion.get("labels"):
        dump("confusion_matrix.json", confusion)
        plot_confusion(confusion, folder / "confusion_matrix.png")
        written.append(folder / "confusion_matrix.png")
    if result.get("test_samples"):
        dump("sample_predictions.json", result["test_samples"])
    return written


def sample_predictions(archive, instances: list, n: int = 20) -> list[dict]:
    """The model's predictions on the first ``n`` examples (``archive.predict_batches``), each with
    the gold value of every field it predicts that the example also holds (``tags``, ``label``)."""
    chosen = instances[:n]
    out = []
    for inst, pred in zip(chosen, archive.predict_batches(chosen)):
        gold = {k: inst[k] for k in pred if k in inst and k not in ("text", "chars")}
        out.append({**pred, **{f"gold_{k}": v for k, v in gold.items()}})
    return json.loads(json.dumps(out, ensure_ascii=False, default=str))


def description(tags: dict, metrics: dict, paper: Optional[str]) -> str:
    """The run's MLflow description (``mlflow.note.content``, Markdown)."""
    key = tags.get("leaderboard_metric", "")
    lines = [f"**{tags.get('spec_name') or tags.get('model', '')}**: model `{tags.get('model', '')}`"
             + (f", encoder `{tags['encoder']}`" if tags.get("encoder") else "")
             + f", dataset `{tags.get('task', '')}/{tags.get('dataset', '')}`"
             + (f", seed {tags['seed']}" if tags.get("seed") else "") + "."]
    if key in metrics:
        lines.append(f"Headline: {key.replace('_', ' ')} **{shown(key, metrics[key])}**"
                     + (f"; the paper: {paper}." if paper else "."))
    elif paper:
        lines.append(f"The paper: {paper}.")
    lines.append(f"Spec hash `{tags.get('spec_hash', '')[:12]}`, commit `{tags.get('git_commit', '')[:12]}`.")
    return "\n\n".join(lines)
