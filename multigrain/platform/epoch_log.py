"""The training log: one summary line per epoch, printed to stderr even under ``CI=true`` /
``MULTIGRAIN_QUIET=1`` (which silence only the progress bars)::

    epoch 2/5 | train loss 0.4321 | dev f1 0.8123 precision 0.8000 recall 0.8250 loss 0.3100 |
    best f1 0.8123 (epoch 2) | elapsed 12.4s | remaining ~18.6s

The dev metrics start with the trainer's validation metric; the numbers are those of the epoch's
record in ``metrics.json``'s history (4 decimals). The remaining time is the mean epoch time so
far times the epochs left to ``num_epochs`` (patience may end the run sooner). A model may end
the line with a hint about the epoch's record: its method ``epoch_hint(record) -> str | None``.
"""
from __future__ import annotations

import sys
from typing import Optional, TextIO


def duration(seconds: float) -> str:
    """``4.2s``, ``3m05s``, ``1h02m03s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def epoch_line(record: dict, num_epochs: int, metric_name: str, best: Optional[float], best_epoch: Optional[int],
               elapsed: float, hint: Optional[str] = None) -> str:
    """The summary line of the epoch ``record`` (``{"epoch", "train_loss", "validation_<m>", ...}``)
    of a run of ``num_epochs``; ``best``/``best_epoch`` so far, ``elapsed`` training seconds of
    the whole run (every epoch up to this one, resumed ones included)."""
    epoch = record["epoch"]
    parts = [f"epoch {epoch}/{num_epochs}"]
    if "train_loss" in record:
        parts.append(f"train loss {record['train_loss']:.4f}")
    dev = {k[len("validation_"):]: v for k, v in record.items() if k.startswith("validation_")}
    if dev:
        order = sorted(dev, key=lambda name: name != metric_name)  # stable: the model's order after it
        parts.append("dev " + " ".join(f"{name} {dev[name]:.4f}" for name in order))
        if best is not None:
            parts.append(f"best {metric_name} {best:.4f} (epoch {best_epoch})")
    elif best_epoch is not None:
        parts.append(f"best epoch {best_epoch} (lowest train loss; no dev set)")
    mean = elapsed / max(1, epoch)
    parts.append(f"elapsed {duration(elapsed)}")
    parts.append(f"remaining ~{duration(mean * max(0, num_epochs - epoch))}")
    if hint:
        parts.append(hint)
    return " | ".join(parts)


def print_epoch_line(trainer, record: dict, file: Optional[TextIO] = None) -> None:
    """Print ``epoch_line`` for the epoch a ``training.Trainer`` just finished."""
    config = trainer.config
    hint_of = getattr(getattr(trainer, "model", None), "epoch_hint", None)
    line = epoch_line(record, config.num_epochs, config.metric_name, trainer.best, trainer.best_epoch,
                      trainer.seconds, hint_of(record) if callable(hint_of) else None)
    print(line, file=file or sys.stderr, flush=True)
