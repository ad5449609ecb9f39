"""What every model's forward returns."""
from __future__ import annotations

from typing import NamedTuple

from torch import Tensor


class Result(NamedTuple):
    """A model's answer to a batch of B questions, with K hops (or layers), M memory slots and
    A answer classes."""

    logits: Tensor  # (B, A) the answer at the hop where the model stopped
    attention: Tensor  # (B, K, M) per-hop attention; zeros for hops not taken and for padding
    hops_used: Tensor  # (B,) long in 1..K
    halted: Tensor  # (B,) bool: True = the halting unit stopped it, False = it reached K hops
    hop_logits: Tensor  # (B, K, A) â_k: the answer had it stopped after hop k
    halt_probs: Tensor  # (B, K) π_k, the halting distribution (one-hot at K without stopping)
    loss: Tensor | None  # scalar, summed over the questions; None without answers
    # (B, K, M) a reader that sums its memories through gates (the word reader's summed read): each
    # hop's gate σ(z_i) on each memory, what its sum counted (0 for padding); None for other models
    gates: Tensor | None = None
    # (B,) a mixture of two readers (memnet.models.mixture): reader A's weight in the answer;
    # None for other models
    share: Tensor | None = None
    # (B, K) bool: the stopping rule's verdict after each hop, whether it would stop there (True at
    # K); None for a model without one
    stops: Tensor | None = None


HALT_REASONS = ("max hops", "halted")  # indexed by Result.halted
