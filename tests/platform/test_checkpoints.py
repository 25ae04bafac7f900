"""Checkpoints load with ``weights_only=True``: a crafted file runs nothing and is one clear
error; checkpoints written before the RNG states became tensors still resume."""
import os
import pickle

import numpy as np
import pytest
import torch

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.training import load_checkpoint, rng_state, set_rng_state


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_checkpoint_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "last.pt"
    torch.save({"model": {}, "rng": Payload(marker)}, path)
    with pytest.raises(ConfigurationError, match=r"last.pt: not a multigrain checkpoint, or damaged \(it names the "
                                                 r"Python object posix.system, .* refused without running it\)"):
        load_checkpoint(path, "cpu")
    assert not marker.exists()
    path.write_bytes(pickle.dumps(Payload(marker)))  # a bare pickle, not even a torch zip
    with pytest.raises(ConfigurationError, match="not a multigrain checkpoint"):
        load_checkpoint(path, "cpu")
    assert not marker.exists()


def test_truncated_and_foreign_files_are_clear_errors(tmp_path):
    good = tmp_path / "good.pt"
    torch.save({"w": torch.ones(3)}, good)
    (tmp_path / "cut.pt").write_bytes(good.read_bytes()[:40])
    with pytest.raises(ConfigurationError, match="cut.pt: not a multigrain checkpoint, or damaged"):
        load_checkpoint(tmp_path / "cut.pt", "cpu")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ConfigurationError, match="list.pt: not a multigrain checkpoint \\(holds a list\\)"):
        load_checkpoint(tmp_path / "list.pt", "cpu")
    with pytest.raises(ConfigurationError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "none.pt", "cpu")


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path):
    import random

    np.random.seed(3)
    random.seed(3)
    torch.manual_seed(3)
    torch.save({"rng": rng_state()}, tmp_path / "s.pt")
    expected = (np.random.rand(), random.random(), torch.rand(1).item())
    set_rng_state(load_checkpoint(tmp_path / "s.pt", "cpu")["rng"])
    assert (np.random.rand(), random.random(), torch.rand(1).item()) == expected


def test_a_checkpoint_with_numpy_rng_state_from_before_still_loads(tmp_path):
    np.random.seed(5)
    torch.save({"rng": {"numpy": np.random.get_state()}}, tmp_path / "old.pt")
    expected = np.random.rand()
    kind, keys, pos, has_gauss, cached = load_checkpoint(tmp_path / "old.pt", "cpu")["rng"]["numpy"]
    np.random.set_state((kind, keys, pos, has_gauss, cached))
    assert np.random.rand() == expected
