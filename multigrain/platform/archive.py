"""The run directory, which is also the model archive.

    run_dir/
      config.json        the resolved spec
      spec_hash          sha256 of its canonical JSON
      vocabulary/        vocabulary.json
      best.pt, last.pt   best weights; full training state
      metrics.json       history, validation and test metrics
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from multigrain.platform.config import build
from multigrain.platform.specs import spec_hash
from multigrain.platform.errors import ConfigurationError


def write_run_files(run_dir: Path, spec: dict, vocab) -> None:
    write_run_spec(run_dir, spec)
    vocab.save(run_dir / "vocabulary")


def write_run_spec(run_dir: Path, spec: dict) -> None:
    tmp = run_dir / "config.json.tmp"
    tmp.write_text(json.dumps(spec, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, run_dir / "config.json")
    (run_dir / "spec_hash").write_text(spec_hash(spec) + "\n")


def read_spec(run_dir: Path) -> dict:
    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise ConfigurationError(f"{run_dir}: not a multigrain run directory (no config.json)")
    return json.loads(path.read_text(encoding="utf-8"))


def read_vocabulary(run_dir: Path):
    from multigrain.platform.vocab import Vocabulary

    return Vocabulary.load(Path(run_dir) / "vocabulary")


def load_weights(model, path: Path, device) -> None:
    import torch

    model.load_state_dict(torch.load(path, map_location=device, weights_only=True))


@dataclass
class Archive:
    run_dir: Path
    spec: dict
    model: object
    vocab: object
    reader: object
    device: object

    def read(self, path: str) -> list:
        return list(self.reader.read(path))

    def predict_batches(self, instances: list, batch_size: int = 64) -> Iterator[dict]:
        """JSON-ready predictions, in input order."""
        import torch

        from multigrain.platform.training import move_to

        self.model.eval()
        with torch.no_grad():
            for start in range(0, len(instances), batch_size):
                chunk = instances[start:start + batch_size]
                out = self.model(**move_to(self.model.tensorize(chunk), self.device))
                yield from self.model.make_output_human_readable(out, chunk)


def load_archive(run_dir: str | Path, weights: str = "best.pt", device: Optional[str] = None) -> Archive:
    """Rebuild the model of a run and load its weights."""
    from multigrain.platform.experiment import Experiment
    from multigrain.platform.training import pick_device

    run_dir = Path(run_dir)
    spec = read_spec(run_dir)
    if not (run_dir / weights).exists():
        raise ConfigurationError(f"{run_dir}: no {weights} (did the training finish an epoch?)")
    vocab = read_vocabulary(run_dir)
    exp: Experiment = build(Experiment, spec)
    model = exp.model.construct(vocab=vocab)
    dev = pick_device(None) if device is None else __import__("torch").device(device)
    model.to(dev)
    load_weights(model, run_dir / weights, dev)
    model.eval()
    return Archive(run_dir, spec, model, vocab, exp.validation_dataset_reader, dev)

