"""Files a model fits on its training data before it is built (a subword model, a label map...),
kept in the run directory beside the vocabulary::

    run_dir/resources/<name>

A model that needs one takes a constructor argument ``resources: Optional[Resources]``; the
platform offers it (``Lazy.construct(offered=...)``) wherever it builds a run's model, so specs
never name it and their hashes do not change:

- a fresh run: ``Resources(run_dir / "resources", training=train_instances)``: a missing file is
  fitted by the model's function on the training instances and written atomically (``.tmp``,
  then ``os.replace``);
- ``--resume``, ``predict``, ``evaluate``, ``serve``: ``Resources(run_dir / "resources")``
  without training data: the saved file is read; a missing one is a ConfigurationError.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional, Sequence

from multigrain.platform.errors import ConfigurationError

#: the folder of a run directory that holds the resources
FOLDER = "resources"


class Resources:
    """The resource files of one run (see the module docstring)."""

    def __init__(self, directory: str | Path, training: Optional[Sequence] = None):
        self.directory = Path(directory)
        self.training = training

    def get(self, name: str, fit: Callable[[Sequence, Path], None]) -> Path:
        """The path of resource ``name``; when it does not exist yet and training instances are
        at hand, ``fit(training_instances, tmp_path)`` writes it first (then it is moved into
        place, so a killed fit leaves no half file)."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"a resource name is a plain file name, got {name!r}")
        path = self.directory / name
        if path.exists():
            return path
        if self.training is None:
            raise ConfigurationError(f"{self.directory.parent}: no {FOLDER}/{name} (a run directory made before "
                                     f"the model fitted it, or an incomplete copy)")
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(name + ".tmp")
        tmp.unlink(missing_ok=True)  # a link planted there goes; what it points to is never written
        fit(self.training, tmp)
        os.replace(tmp, path)
        return path
