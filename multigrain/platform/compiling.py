"""``trainer.compile: true``: the training forward through ``torch.compile`` (TorchDynamo captures
the model's forward, Inductor generates fused kernels: C++/OpenMP on a CPU, Triton on a GPU).

Shapes: every batch has its own lengths, so the forward is compiled with ``dynamic=True``: one
graph with symbolic batch and sequence sizes, instead of a first static graph and a recompile at
the first new length. Python the graph cannot hold (a model's metrics, a lattice's bookkeeping)
falls back to eager between graphs (graph breaks), so every model trains compiled, some faster
than others. Weights are shared with the eager module: checkpoints, validation and prediction
use the model itself, unchanged.

Where ``torch.compile`` cannot run (``refusal``: TorchDynamo does not import or does not support
this Python; no C++ compiler for a CPU, no Triton for a GPU) the spec is refused with the reason
before the run directory is made, not at the first step of a training.
"""
from __future__ import annotations

from typing import Optional

import torch


def refusal(device: torch.device) -> Optional[str]:
    """Why ``torch.compile`` cannot run here (a message for the spec error), or None: TorchDynamo
    must import and support this Python, and Inductor needs a C++ compiler for a CPU and Triton
    for a CUDA GPU."""
    head = "trainer.compile: torch.compile cannot run here"
    tail = "; remove the key (or -o trainer.compile=false) to train eagerly"
    try:
        import torch._dynamo
    except Exception as e:  # a broken or partial torch install
        return f"{head}: torch._dynamo does not import ({type(e).__name__}: {e}){tail}"
    if not torch._dynamo.is_dynamo_supported():
        import sys

        return f"{head}: TorchDynamo does not support Python {sys.version.split()[0]} on {sys.platform}{tail}"
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            return f"{head}: Inductor needs Triton for a CUDA GPU, and it is not installed{tail}"
        return None
    import shutil

    try:
        from torch._inductor import cpp_builder

        compiler = cpp_builder.get_cpp_compiler()
    except Exception as e:
        return f"{head}: Inductor finds no C++ compiler ({type(e).__name__}: {e}){tail}"
    if shutil.which(compiler) is None:
        return f"{head}: Inductor's C++ compiler {compiler!r} is not on PATH (set CXX, or install g++){tail}"
    return None


def compiled(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``module`` whose calls run through ``torch.compile`` (``refusal`` a ConfigurationError)."""
    why_not = refusal(device)
    if why_not:
        from multigrain.platform.errors import ConfigurationError

        raise ConfigurationError(why_not)
    return torch.compile(module, dynamic=True)
