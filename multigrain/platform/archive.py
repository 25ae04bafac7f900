"""The run directory, which is also the model archive.

    run_dir/
      config.json        the resolved spec
      spec_hash          sha256 of its canonical JSON
      vocabulary/        vocabulary.json
      resources/         files the model fitted on the training data (platform/resources.py)
      best.pt, last.pt   best weights; full training state
      metrics.json       history, validation and test metrics
      plugins.json       the plugin modules the spec needs (``plugins``), when it needs any
"""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from multigrain.platform import jsonio
from multigrain.platform.data import json_lines
from multigrain.platform.specs import spec_hash
from multigrain.platform.errors import ConfigurationError
from multigrain.platform.paths import input_problem
from multigrain.platform.weights import open_lock, write_atomically


@contextmanager
def training_lock(run_dir: Path) -> Iterator[None]:
    """Held while this process trains into ``run_dir``: a second process training there at the same
    time is refused (``ConfigurationError`` naming the first one's pid) instead of both writing its
    checkpoints. An advisory ``flock`` on ``.<name>.lock`` beside the directory (the directory
    itself may be removed and made again under it), removed on release; the kernel releases the
    lock when the holder exits or is killed, so a file left by a killed process never blocks."""
    import fcntl

    named = Path(os.path.abspath(run_dir))  # "-s ." names the folder itself: its lock goes beside it, not in it
    named.parent.mkdir(parents=True, exist_ok=True)
    path = named.parent.resolve() / f".{named.name}.lock"  # the lock file itself is never a link followed
    while True:
        handle = open_lock(path)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise ConfigurationError(f"{run_dir}: another process{f' (pid {holder})' if holder else ''} is "
                                     f"training in this run directory; wait for it to end or choose another -s")
        try:  # the file may have been removed by its last holder between our open and our lock
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    with handle:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def write_run_files(run_dir: Path, spec: dict, vocab) -> None:
    write_run_spec(run_dir, spec)
    vocab.save(run_dir / "vocabulary")


def write_run_spec(run_dir: Path, spec: dict) -> None:
    text = json.dumps(spec, indent=2, ensure_ascii=False)
    write_atomically(run_dir / "config.json", lambda f: f.write(text), binary=False)
    write_atomically(run_dir / "spec_hash", lambda f: f.write(spec_hash(spec) + "\n"), binary=False)


def read_spec(run_dir: Path) -> dict:
    """The run's resolved spec (``config.json``); a damaged one is a ConfigurationError naming it (and
    the key, for a ``trainer`` that is no object: the run plan reads it before the spec is validated)."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise ConfigurationError(f"{run_dir}: not a multigrain run directory (no config.json)")
    spec = jsonio.read_object(path, "damaged, not a JSON spec")
    if "trainer" in spec and not isinstance(spec["trainer"], dict):
        raise ConfigurationError(f"{path}: damaged, not a JSON spec (trainer: expected an object, got "
                                 f"{json.dumps(spec['trainer'])[:60]})")
    return spec


def read_result(run_dir: Path) -> Optional[dict]:
    """The run's ``metrics.json`` (None when there is none). The training writes it whole or not at
    all, so one that is no JSON object (cut short, a list) is a ConfigurationError naming it."""
    path = Path(run_dir) / "metrics.json"
    return jsonio.read_object(path, "damaged, not a run's results") if path.exists() else None


def own_result(run_dir: Path, digest: str) -> Optional[dict]:
    """``read_result`` when it holds a finished run of the spec whose hash is ``digest``, else None."""
    done = read_result(run_dir)
    return done if done is not None and done.get("finished") and done.get("spec_hash") == digest else None


def read_vocabulary(run_dir: Path):
    """The run's vocabulary; a damaged one is a ConfigurationError naming it (``Vocabulary.load``)."""
    from multigrain.platform.vocab import Vocabulary

    path = Path(run_dir) / "vocabulary" / "vocabulary.json"
    if not path.is_file():
        raise ConfigurationError(f"{run_dir}: no vocabulary/vocabulary.json (not a complete run directory)")
    return Vocabulary.load(path.parent)


def run_resources(run_dir: Path, training: Optional[list] = None):
    """The run's fitted resource files (``resources/``); with ``training`` instances a missing one
    is fitted (a fresh run), else it must exist (see ``platform/resources.py``)."""
    from multigrain.platform.resources import FOLDER, Resources

    return Resources(Path(run_dir) / FOLDER, training)


def load_weights(model, path: Path, device) -> None:
    """The state dict file ``path`` (``best.pt``) into ``model``: a file that is not one, or does not
    fit the model, is one ConfigurationError naming it (``checkpoints.load_model_weights``)."""
    from multigrain.platform.checkpoints import load_model_weights

    load_model_weights(model, path, device)


@dataclass
class Archive:
    """A run's model with its weights loaded, the reader that makes its inputs, and its batching."""

    run_dir: Path
    spec: dict
    model: object
    vocab: object
    reader: object
    device: object
    data_loader: object  # the spec's DataLoaderConfig: evaluation batch size and bucketing

    def read(self, path: str, reader=None) -> list:
        """Examples of a data file read with ``reader`` (default: the archive's)."""
        if problem := input_problem(path, "data file"):
            raise ConfigurationError(problem)
        return list((reader or self.reader).read(path))

    def read_json_lines(self, path: str) -> list:
        """``predict`` input: one JSON object per line (``{"text": ...}``), made into examples by the
        model and annotated by the reader (lattices); a bad line is a DataError naming it."""
        return self.reader.annotate(read_json_lines(path, self.model))

    def batches(self, instances: list, batch_size: Optional[int] = None):
        """Length-bucketed batches (the spec's ``eval_batch_size`` unless ``batch_size``)."""
        from multigrain.platform.batching import BatchIterator

        return BatchIterator(instances, self.model.tensorize, self.model.instance_length,
                             batch_size=batch_size or self.data_loader.eval_batch_size, shuffle=False,
                             noise=self.data_loader.bucket_noise)

    def predict_batches(self, instances: list, batch_size: Optional[int] = None) -> Iterator[dict]:
        """JSON-ready predictions, in input order (computed in length buckets)."""
        import torch

        from multigrain.platform.devices import move_to

        batches = self.batches(instances, batch_size)
        by_position: dict[int, dict] = {}
        self.model.eval()
        with torch.no_grad():
            for positions in batches.batches(0):
                chunk = [instances[i] for i in positions]
                out = self.model(**move_to(self.model.tensorize(chunk), self.device))
                by_position.update(zip(positions, self.model.make_output_human_readable(out, chunk)))
        for i in range(len(instances)):
            yield by_position[i]


def read_json_lines(path: str, model) -> list:
    """Examples made by ``model.text_to_instance`` from one JSON object per line; a bad line is
    a DataError naming it."""
    from multigrain.platform.errors import DataError

    if problem := input_problem(path, "input file"):
        raise ConfigurationError(problem)
    out = []
    for n, data in json_lines(path):  # utf-8(-sig), a bad byte or JSON line named by line
        try:
            inst = model.text_to_instance(data)
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(path, n, f"cannot make an example: {e}") from None
        inst.source = (path, n)
        out.append(inst)
    return out
