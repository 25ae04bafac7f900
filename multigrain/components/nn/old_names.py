"""Reading checkpoints saved before a module's parameters were renamed (the move of the
encoders' layers to ``components/nn``): the module maps the old names as its
``load_state_dict`` reads them, so every archive keeps loading with ``strict=True``."""
from __future__ import annotations

from functools import partial
from typing import Union

import torch
from torch import nn

#: old name prefix -> new prefix, or a tuple of new prefixes to split a fused tensor into
Renames = dict[str, Union[str, tuple[str, ...]]]


def rename_old_entries(state_dict: dict[str, torch.Tensor], prefix: str, renames: Renames) -> None:
    """In place: the entry ``prefix + old + rest`` becomes ``prefix + new + rest``. With a tuple
    of new prefixes the tensor is split along dim 0 into that many equal parts, in order (a
    fused ``[3d, d]`` q/k/v projection into three ``[d, d]`` ones)."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        rest = key[len(prefix):]
        old = next((o for o in renames if rest.startswith(o)), None)
        if old is None:
            continue
        new, tail, value = renames[old], rest[len(old):], state_dict.pop(key)
        if isinstance(new, str):
            state_dict[prefix + new + tail] = value
        else:
            for name, part in zip(new, value.chunk(len(new), dim=0)):
                state_dict[prefix + name + tail] = part


def _rename_hook(renames: Renames, module: nn.Module, state_dict, prefix: str, *unused) -> None:
    rename_old_entries(state_dict, prefix, renames)


def accept_old_names(module: nn.Module, renames: Renames) -> None:
    """Let ``module`` (and so any model holding it) load state dicts that use the old names."""
    module.register_load_state_dict_pre_hook(partial(_rename_hook, renames))
