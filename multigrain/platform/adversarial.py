"""Adversarial training on the embeddings (``trainer.adversarial``): the fast gradient method.

Miyato, Dai and Goodfellow (2017), "Adversarial training methods for semi-supervised text
classification", eq. 2 and 5: with g the gradient of the loss L(E) with respect to an embedding
matrix E (after the ordinary backward pass of a step),

    r_adv = epsilon * g / ||g||_2                (the norm over the whole matrix)

and the step's gradient becomes grad L(E) + grad L(E + r_adv): a second forward and backward pass
with every matched matrix moved by its own r_adv, after which the matrices are put back exactly
as they were before the optimizer steps. Only the rows of the batch's tokens have a nonzero g,
so only they move. The norm stays on the device (clamped away from zero, not tested on the host),
so the step loop gains no host sync.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Annotated

import torch

from multigrain.platform.errors import ConfigurationError
from multigrain.platform.hints import Range

#: the parameter names the default pattern matches: a Hugging Face backbone's token embeddings
DEFAULT_PARAMETERS = r"word_embeddings\.weight$"


class AdversarialConfig:
    """The ``trainer.adversarial`` section: ``epsilon`` (the L2 size of each matrix's
    perturbation) and ``parameters`` (a regular expression searched in the model's parameter
    names; every trainable match is perturbed)."""

    def __init__(self, epsilon: Annotated[float, Range(0.0, low_open=True)] = 1.0,
                 parameters: str = DEFAULT_PARAMETERS):
        if epsilon <= 0:
            raise ValueError(f"epsilon is the size of the perturbation and must be above 0, got {epsilon!r}")
        try:
            re.compile(parameters)
        except re.error as e:
            raise ValueError(f"parameters: {parameters!r} is not a regular expression ({e})") from None
        self.epsilon = epsilon
        self.parameters = parameters


def matched_parameters(model: torch.nn.Module, config: AdversarialConfig) -> list[tuple[str, torch.nn.Parameter]]:
    """The trainable parameters ``config.parameters`` names; none is a ConfigurationError naming
    the spec path and the model's embedding matrices (checked before the run directory is made)."""
    pattern = re.compile(config.parameters)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    matched = [(n, p) for n, p in params if pattern.search(n)]
    if not matched:
        embeddings = [n for n, p in params if "embed" in n.lower() and p.dim() == 2]
        known = f"; its embedding matrices: {', '.join(embeddings)}" if embeddings else ""
        raise ConfigurationError(f"trainer.adversarial.parameters: {config.parameters!r} matches no trainable "
                                 f"parameter of the model{known}")
    return matched


class FastGradient:
    """Moves the matched matrices along their normalised gradients and back (one step's attack)."""

    def __init__(self, model: torch.nn.Module, config: AdversarialConfig):
        self.epsilon = config.epsilon
        self.params = [p for _, p in matched_parameters(model, config)]

    @torch.no_grad()
    def _deltas(self) -> list[tuple[torch.nn.Parameter, torch.Tensor]]:
        deltas = []
        for p in self.params:
            if p.grad is None:  # not used by this batch's loss
                continue
            g = (p.grad.to_dense() if p.grad.is_sparse else p.grad).float()
            norm = torch.linalg.vector_norm(g).clamp_min(torch.finfo(torch.float32).tiny)
            deltas.append((p, (g * (self.epsilon / norm)).to(p.dtype)))
        return deltas

    @contextmanager
    def perturbed(self):
        """Inside: every matched matrix is E + r_adv (from its current gradient); after: E again,
        restored bit for bit from a copy, the gradients left to accumulate the second pass's."""
        deltas = self._deltas()
        saved = [p.detach().clone() for p, _ in deltas]
        with torch.no_grad():
            for p, r in deltas:
                p.add_(r)
        try:
            yield
        finally:
            with torch.no_grad():
                for (p, _), original in zip(deltas, saved):
                    p.copy_(original)
