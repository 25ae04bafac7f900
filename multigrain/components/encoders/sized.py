"""The base of the encoders whose input and output sizes are fixed by their constructor."""
from __future__ import annotations

from multigrain.platform.kinds import Encoder


class SizedEncoder(Encoder):
    """An encoder that sets ``input_dim`` and ``output_dim`` in its constructor."""

    input_dim: int
    output_dim: int

    def get_input_dim(self) -> int:
        return self.input_dim

    def get_output_dim(self) -> int:
        return self.output_dim
