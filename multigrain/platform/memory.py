"""Whether a model's training fits the machine, found before any parameter is allocated.

The model is built once on torch's ``meta`` device (shapes only, no storage) to count its
parameters; training them in float32 takes about ``4 bytes x 4`` per parameter (the weights,
their gradients and Adam's two moments). More than the memory of the device it would train on
(the machine's RAM, the container's limit if lower, or the GPU's) is one SpecError at ``model``
naming both numbers, raised before the run directory is made: ``hidden_size: 10000000`` no
longer ends in the kernel's OOM killer or an allocator traceback.

A model that cannot be built on ``meta`` (a resource it fits from the training data is not
there yet, a library that loads weights its own way) is not estimated: the real build follows.
"""
from __future__ import annotations

import os
import random
import warnings
from pathlib import Path
from typing import Optional

from multigrain.platform.digits import whole_number
from multigrain.platform.errors import Problem, SpecError

#: bytes per parameter in training: float32 weights, gradients and two Adam moments
BYTES_PER_PARAMETER = 4
TRAINING_COPIES = 4


def parameter_count(model, vocab, run_dir: Optional[Path] = None) -> Optional[int]:
    """Parameters of the model ``model`` (a ``Lazy[Model]``) builds with ``vocab``, counted on the
    meta device; None when it cannot be built there. Random states are left as they were, so the
    real build that follows initialises exactly as without this count."""
    import numpy as np
    import torch

    from multigrain.platform.resources import FOLDER, Resources

    offered = {"resources": Resources(Path(run_dir) / FOLDER)} if run_dir is not None else {}
    states = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            built = model.construct(vocab=vocab, offered=offered, checkpoint_follows=True)
        return sum(p.numel() for p in built.parameters())
    except RuntimeError as e:
        if "overflow" in str(e).lower():  # a size whose bytes do not fit 64 bits
            return -1
        return None
    except Exception:  # MultigrainError included: the real build reports what is wrong
        return None
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])


def machine_memory() -> int:
    """Bytes of RAM this process may use: the machine's, or its cgroup's limit when lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        limit = whole_number(text)  # "max": no limit
        if limit and limit < total:
            total = limit
    return total


def device_memory(cuda_device: Optional[int]) -> tuple[int, str]:
    """(bytes, what they are) of the device training would use (``devices.pick_device``'s choice)."""
    import torch

    from multigrain.platform.devices import pick_device

    device = pick_device(cuda_device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return props.total_memory, f"the memory of GPU {device.index or 0} ({props.name})"
    return machine_memory(), "this machine's memory"


def size(n: float) -> str:
    """Bytes in binary units: ``125.6 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} PiB"


def check_training_memory(model, vocab, run_dir: Optional[Path] = None, cuda_device: Optional[int] = None,
                          available: Optional[int] = None, source: Optional[str] = None) -> Optional[int]:
    """Refuse (SpecError at ``model``) a model whose training needs more memory than the device it
    would train on has; returns the parameter count (None: not estimated)."""
    count = parameter_count(model, vocab, run_dir)
    if count is None:
        return None
    where = "this machine's memory"
    if available is None:
        available, where = device_memory(cuda_device)
    if count < 0:
        raise SpecError([Problem("model", "the model's sizes are so large that the bytes of one of its tensors "
                                          "overflow a 64-bit count: make it smaller (hidden sizes, embedding "
                                          "dimensions, layers)", "value")], source)
    need = count * BYTES_PER_PARAMETER * TRAINING_COPIES
    if need > available:
        raise SpecError([Problem("model", f"{count:,} parameters: training them takes about {size(need)} "
                                          f"({BYTES_PER_PARAMETER} bytes x {TRAINING_COPIES}: the weights, their "
                                          f"gradients and the optimizer's two moments), more than {where} "
                                          f"({size(available)}); make the model smaller (hidden sizes, embedding "
                                          f"dimensions, layers)", "value")], source)
    return count
