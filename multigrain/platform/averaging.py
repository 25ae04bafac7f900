"""An exponential moving average of a model's weights (``trainer.moving_average``)."""
from __future__ import annotations

from contextlib import contextmanager

import torch


class MovingAverage:
    """An exponential moving average of a model's floating-point parameters and buffers.

    After step t the average moves toward the weights by ``1 - min(decay, (1 + t) / (10 + t))``
    (AllenNLP's and TensorFlow's warm-up: early averages do not drag in the random init).
    ``swapped_in()`` puts the averaged weights into the model for evaluation and restores the
    raw ones afterwards.
    """

    def __init__(self, model: torch.nn.Module, decay: float):
        self.model, self.decay, self.updates = model, decay, 0
        self.names = [n for n, t in model.state_dict().items() if t.is_floating_point()]
        self.shadow = {n: t.detach().clone() for n, t in model.state_dict().items() if n in self.names}

    def _live(self) -> list[torch.Tensor]:
        state = self.model.state_dict(keep_vars=True)
        return [state[n].detach() for n in self.names]

    @torch.no_grad()
    def update(self) -> None:
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        torch._foreach_lerp_([self.shadow[n] for n in self.names], self._live(), 1.0 - decay)

    @torch.no_grad()
    def _exchange(self) -> None:
        for n, live in zip(self.names, self._live()):
            tmp = live.clone()
            live.copy_(self.shadow[n])
            self.shadow[n].copy_(tmp)

    @contextmanager
    def swapped_in(self):
        self._exchange()
        try:
            yield
        finally:
            self._exchange()

    def state_dict(self) -> dict:
        return {"updates": self.updates, "shadow": self.shadow}

    def load_state_dict(self, state: dict) -> None:
        self.updates = state["updates"]
        for n in self.names:
            self.shadow[n].copy_(state["shadow"][n])
