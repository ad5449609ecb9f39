"""Adaptive Computation Time per position (Graves 2016, arXiv:1603.08983), as the Universal
Transformer halts each position of its sequence (Dehghani et al. 2019, arXiv:1807.03819, §2.2).

One shared step is applied to every position i of a sequence again and again. After step t
each position still running has a new state s_t^i and a halting probability p_t^i:

    p_t^i = σ(W_h s_t^i + b_h)
    N^i   = min(T_max, min{t : Σ_{n≤t} p_n^i ≥ 1 - ε})     steps position i takes
    R^i   = 1 - Σ_{n<N^i} p_n^i                            its remainder
    w_t^i = p_t^i for t < N^i,  R^i at t = N^i,  0 after   (Σ_t w_t^i = 1)
    ŝ^i   = Σ_t w_t^i s_t^i                                its output state
    ρ^i   = N^i + R^i                                      its ponder cost

A position that has halted keeps its last state s_{N^i}^i: the positions still running read
it, it is no longer updated. N^i is a step count, so the ponder cost's gradient reaches the
halting unit through R^i alone. Padding positions never run.

Where the UT paper's code (tensor2tensor's universal_transformer_act, the paper's Appendix C)
differs, this file follows Graves: there p_t is computed from the state entering step t, the
output is a running interpolation ŝ ← w_t s_t + (1 - w_t) ŝ rather than the sum above, a
position reaching T_max without crossing the threshold gets no remainder (its weights sum to
less than one), and halted positions go on being transformed in the states the others read.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class Ponder(NamedTuple):
    """ACT's record of B sequences of T positions after the steps taken so far."""

    running: Tensor  # (B, T) bool: still updated (padding never is)
    total: Tensor  # (B, T) Σ p_n over the steps taken before halting (the remainder excluded)
    steps: Tensor  # (B, T) long N: steps taken
    remainder: Tensor  # (B, T) R, set at the step a position halts (0 before)
    halted: Tensor  # (B, T) bool: the threshold stopped it, not the step limit
    output: Tensor  # (B, T, d) Σ_t w_t s_t so far

    @classmethod
    def start(cls, state: Tensor, real: Tensor) -> Ponder:
        """Nothing taken yet: state (B, T, d) the states before step 1; real (B, T) bool, the
        positions that run."""
        zeros = state.new_zeros(real.shape)  # (B, T)
        return cls(real.clone(), zeros, torch.zeros_like(real, dtype=torch.long), zeros,
                   torch.zeros_like(real), torch.zeros_like(state))

    def cost(self) -> Tensor:
        """ρ = N + R per position (B, T); 0 for padding."""
        return self.steps + self.remainder


def act_step(ponder: Ponder, state: Tensor, new: Tensor, p: Tensor, *, last: bool,
             epsilon: float) -> tuple[Ponder, Tensor, Tensor]:
    """One step of ACT. state (B, T, d): the states the step read; new (B, T, d): its results
    s_t; p (B, T): their halting probabilities p_t; `last`: the step limit T_max is reached.

    Returns the record after this step, the states the next step reads (B, T, d) (halted
    positions keep theirs) and this step's weights w_t (B, T)."""
    running = ponder.running
    reached = ponder.total + p >= 1 - epsilon  # (B, T) the threshold is crossed at this step
    stop = running & (reached | last)  # (B, T) N = t
    weight = torch.where(stop, 1 - ponder.total, p * running)  # (B, T) w_t: R at N, p_t before, 0 after
    go_on = running & ~stop
    ponder = Ponder(
        running=go_on,
        total=ponder.total + p * go_on,
        steps=ponder.steps + running,
        remainder=torch.where(stop, 1 - ponder.total, ponder.remainder),
        halted=ponder.halted | (stop & reached),
        output=ponder.output + weight[..., None] * new,  # ŝ += w_t s_t
    )
    return ponder, torch.where(running[..., None], new, state), weight
