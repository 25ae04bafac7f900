"""A trained run (``runs.Run``) as a model archive: its model with saved weights loaded
(``load_archive``), and that model scored on a data file (``score``, ``Scores``).

The archive is the run directory (``archive``: its files, the ``Archive`` of a loaded model);
the model is built from the run's spec with its saved vocabulary and resources, on the trainer's
device unless told otherwise, and reads data with one of the spec's readers (``reader``: train,
validation or test, ``Experiment.reader_for``). ``multigrain evaluate`` and ``predict``, serving,
``evaluate-all`` and the benchmark scripts go through it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from multigrain.platform import archive as files
from multigrain.platform.errors import ConfigurationError, SpecError


def built_model(run):
    """(``run``'s model built from its spec with its saved vocabulary and resources, no weights
    loaded; that vocabulary). The files its weights started from (pretrained vectors, another run)
    are not read: its own checkpoint holds every weight (``config.Lazy.construct``)."""
    vocab = files.read_vocabulary(run.run_dir)
    try:
        model = run.experiment.model.construct(vocab=vocab, offered={"resources": files.run_resources(run.run_dir)},
                                               checkpoint_follows=True)
    except SpecError as e:  # the spec validated when it trained: the run's saved files name the cause
        if e.source is not None:
            raise
        raise SpecError(e.problems, f"{run.run_dir / 'config.json'} (with the run's vocabulary/ and "
                                    f"resources/)") from None
    return model, vocab


def load_archive(run, weights: str = "best.pt", device: Optional[str] = None, reader: str = "test") -> files.Archive:
    """``run``'s model with ``weights`` loaded, on ``device`` (default: the trainer's), reading
    data with the spec's ``reader`` (``Experiment.reader_for``: train, validation or test)."""
    import torch

    from multigrain.platform.devices import pick_device

    if not (run.run_dir / weights).exists():
        raise ConfigurationError(f"{run.run_dir}: no {weights} (did the training finish an epoch?)")
    model, vocab = built_model(run)
    dev = pick_device(run.trainer.cuda_device) if device is None else torch.device(device)
    model.to(dev)
    files.load_weights(model, run.run_dir / weights, dev)
    model.eval()
    return files.Archive(run.run_dir, run.spec, model, vocab, run.experiment.reader_for(reader), dev,
                         run.experiment.data_loader)


def score(run, data_path: str, batch_size: Optional[int] = None, device: Optional[str] = None,
          archive: Optional[files.Archive] = None, reader: str = "test") -> "Scores":
    """The metrics of ``run``'s best weights (or ``archive``'s) on ``data_path`` read with the
    spec's ``reader``, with the counts: instances the reader kept and instances the model scored."""
    from multigrain.platform.evaluation import evaluate_counted

    archive = archive or run.load_archive(device=device)
    read_with = run.experiment.reader_for(reader)
    instances = archive.read(data_path, read_with)
    metrics, scored = evaluate_counted(archive.model, archive.batches(instances, batch_size), archive.device,
                                       desc=f"evaluate {data_path}")
    return Scores(metrics, len(instances), scored, reader, getattr(read_with, "registered_name", ""),
                  getattr(read_with, "split", None))


@dataclass(frozen=True)
class Scores:
    """What ``score`` measured: the metrics, instances read and scored, and the reader used (the
    spec's ``reader`` split, its registered type, and its own ``split`` option if it has one)."""

    metrics: dict
    read: int
    scored: int
    reader: str
    reader_type: str
    reader_split: Optional[str]
