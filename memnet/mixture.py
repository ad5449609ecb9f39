"""Two trained readers, one answer: a gate over the question's words mixes their answer distributions.

The memory network answers the chains (qa2, qa3, qa16) that the word reader cannot, and the word
reader answers the tasks that turn on which fact names which thing (qa17, qa18) that the memory
network cannot (docs/results.md). Each is trained on the same tasks by itself; the mixture is

    g(q) = σ(w · x(q) + c)                       x(q): which vocabulary words the question has
    p(a | story, q) = g(q) p_A(a) + (1 − g(q)) p_B(a)

with w and c fitted, the readers frozen, by maximum likelihood of the right answers on held-out
questions. On the questions a reader was trained on, both are right almost everywhere (a joint
memory network is 97.7% right on its training questions and 90% on valid), so the training
questions cannot tell the gate which reader to trust; questions neither reader has seen can.
The gate sees no task number: only the question's words.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from memnet.data import Batch


def question_words(batch: Batch, vocab_size: int) -> Tensor:
    """(N, V) float: 1 where the question has the word (padding and <unk> left out)."""
    x = torch.zeros(len(batch), vocab_size)
    x.scatter_(1, batch.query.cpu(), 1.0)
    x[:, :2] = 0
    return x


def mixed(z: Tensor, logp_a: Tensor, logp_b: Tensor) -> Tensor:
    """(N, A) log(g p_A + (1 − g) p_B) for g = σ(z), z (N,): log g and log(1 − g) as log-sigmoids,
    finite where g rounds to 0 or 1."""
    z = z[:, None]
    return torch.logaddexp(logp_a + F.logsigmoid(z), logp_b + F.logsigmoid(-z))


class Gate:
    """g(q) = σ(w · x(q) + c), the share of reader A in the mixture."""

    def __init__(self, vocab_size: int):
        self.w, self.c = torch.zeros(vocab_size), torch.zeros(())

    def share(self, x: Tensor) -> Tensor:
        """(N,) reader A's weight for each question, from x (N, V)."""
        return torch.sigmoid(x @ self.w + self.c)

    def mix(self, x: Tensor, logp_a: Tensor, logp_b: Tensor) -> Tensor:
        """(N, A) log p of the mixture, from the readers' log-probabilities (N, A) each."""
        return mixed(x @ self.w + self.c, logp_a, logp_b)

    def fit(self, x: Tensor, logp_a: Tensor, logp_b: Tensor, answer: Tensor, *, steps: int = 500,
            lr: float = 0.05, l2: float = 1e-3) -> Gate:
        """Maximum likelihood of `answer` (N,) under the mixture, plus l2 · |w|², by Adam from
        g = 1/2 on every question; the readers' log-probabilities are fixed. A question with no
        answer class (-1) counts for nothing."""
        w, c = torch.zeros_like(self.w, requires_grad=True), torch.zeros((), requires_grad=True)
        optimizer = torch.optim.Adam([w, c], lr=lr)
        known = answer >= 0
        x, logp_a, logp_b, answer = x[known], logp_a[known], logp_b[known], answer[known]
        with torch.enable_grad():
            for _ in range(steps):
                logp = mixed(x @ w + c, logp_a, logp_b)
                loss = -logp.gather(1, answer[:, None]).mean() + l2 * (w ** 2).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        self.w, self.c = w.detach(), c.detach()
        return self


def crossfit_wrong(x: Tensor, logp_a: Tensor, logp_b: Tensor, answer: Tensor, tasks: Tensor) -> Tensor:
    """(N,) bool: each question answered wrong by a gate fitted on the other half of its task's
    questions (alternate questions of each task in two halves), so that the gate's own valid
    error is not its fit to the questions it is scored on."""
    half = torch.zeros(len(answer), dtype=torch.bool)
    for t in tasks.unique():
        rows = (tasks == t).nonzero()[:, 0]
        half[rows[::2]] = True
    wrong = torch.zeros(len(answer), dtype=torch.bool)
    for part in (half, ~half):
        gate = Gate(x.shape[1]).fit(x[~part], logp_a[~part], logp_b[~part], answer[~part])
        wrong[part] = (gate.mix(x, logp_a, logp_b).argmax(-1) != answer)[part]
    return wrong
