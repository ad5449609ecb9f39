"""Dropout from a model's own generator, for the readers that train by restarts.

torch's global generator would make a restart's dropout depend on what ran before it; a model
that mixes this in draws from `self.noise` instead, seeded from the restart's generator, and
carries the generator's state in its state dict, so a resumed run draws what the uninterrupted
one would.
"""
from __future__ import annotations

import torch
from torch import Tensor


class OwnDropout:
    """Mixed into an nn.Module with a `dropout` rate; `seed_noise` is called from reset_parameters."""

    dropout: float
    training: bool

    def seed_noise(self, generator: torch.Generator | None) -> None:
        """The dropout generator, seeded with one number drawn from `generator` (None: draw nothing, seed 0)."""
        seed = int(torch.randint(2**62, (), generator=generator)) if generator is not None else 0
        self.noise = torch.Generator().manual_seed(seed)

    def drop(self, x: Tensor) -> Tensor:
        """Dropout in training, from the model's own generator."""
        if self.training and self.dropout > 0:
            keep = torch.rand(x.shape, generator=self.noise).to(x.device) >= self.dropout
            x = x * keep / (1 - self.dropout)
        return x

    def get_extra_state(self) -> Tensor:
        """The dropout generator's state, in checkpoints and the trainer's snapshots."""
        return self.noise.get_state()

    def set_extra_state(self, state: Tensor) -> None:
        self.noise.set_state(state)
