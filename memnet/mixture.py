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

`memnet mix RUN_A RUN_B --out RUN` (load_pair, fit, payload) writes the mixture as a checkpoint
that `memnet eval`, `inspect` and `ask` load like any other (memnet.models.mixture);
scripts/mix_readers.py scores it as a column of the benchmark.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from memnet import checkpoint
from memnet.config import Config
from memnet.data import Batch, Vocab, task_name, task_number
from memnet.errors import MemnetError
from memnet.evaluation import predict
from memnet.models import Mixture, Result
from memnet.models.mixture import mixed, question_words, word_map

__all__ = ["Gate", "Reader", "crossfit_wrong", "answers", "error", "fit", "join", "load_pair", "log_probs", "mixed", "payload", "question_words", "readers"]


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


@dataclass
class Reader:
    """A trained run: its model, config and vocabulary, and where it came from."""
    run: Path
    model: torch.nn.Module
    cfg: Config
    vocab: Vocab


def load_pair(run_a: str | Path, run_b: str | Path) -> tuple[Reader, Reader]:
    """The two run folders' models (RUN/model.pt), refused with a clear error unless they were
    trained on the same tasks with the same answers, words and memory size."""
    a, b = (Reader(Path(run), *checkpoint.load(Path(run) / "model.pt")[:3]) for run in (run_a, run_b))
    for r in (a, b):
        if isinstance(r.model, Mixture):
            raise MemnetError(f"{r.run}: already a mixture of two readers; mix two trained runs")
    if a.cfg.data.task != b.cfg.data.task:
        raise MemnetError(f"{a.run} was trained on tasks {a.cfg.data.task}, {b.run} on {b.cfg.data.task}")
    if a.vocab.answers != b.vocab.answers:
        raise MemnetError(f"{a.run} and {b.run} have different answer classes: not trained on the same data")
    extra = sorted(set(b.vocab.itos) - set(a.vocab.itos))
    if extra:
        raise MemnetError(f"{b.run} knows words {a.run} never saw ({' '.join(extra[:5])}): not trained on the same data")
    if a.cfg.data.memory_size != b.cfg.data.memory_size:
        raise MemnetError(f"{a.run} reads {a.cfg.data.memory_size} memories, {b.run} {b.cfg.data.memory_size}: "
                          f"train both with the same data.memory_size")
    return a, b


def join(a: Reader, b: Reader) -> Mixture:
    """The two readers as one model, the gate at g = 1/2."""
    return Mixture(a.model, b.model, word_map(a.vocab, b.vocab), (a.cfg.model.type, b.cfg.model.type)).eval()


def readers(model: Mixture, batch: Batch) -> tuple[Result, Result]:
    """(reader A's, reader B's) Results on `batch` (in A's words), each run once, in chunks
    (memnet.evaluation.predict)."""
    return predict(model.a, batch), predict(model.b, model.as_b(batch))


def answers(model: Mixture, batch: Batch) -> tuple[Result, Result, Result]:
    """(the mixture's, reader A's, reader B's) Results on `batch` (in A's words)."""
    a, b = readers(model, batch)
    with torch.no_grad():
        return model.combine(batch, a, b), a, b


def log_probs(*results: Result) -> tuple[Tensor, ...]:
    return tuple(r.logits.float().log_softmax(-1) for r in results)


def fit(a: Reader, b: Reader, valid: Batch, tasks: list) -> tuple[Mixture, float, list[dict[str, Any]]]:
    """The mixture of the two readers with its gate fitted on `valid` (a Batch in A's words), each
    reader answering valid once; with the mixture's error on all of valid, and per task: its error
    (its gate fitted on these questions), the cross-fitted error (each question scored by a gate
    fitted on the other half of its task's questions), reader A's mean share and each reader's
    error alone."""
    model = join(a, b)
    alone = readers(model, valid)
    lp = log_probs(*alone)
    x = question_words(valid, len(a.vocab))
    gate = Gate(len(a.vocab)).fit(x, *lp, valid.answer)
    model.gate_w.copy_(gate.w)
    model.gate_c.copy_(gate.c)
    with torch.no_grad():
        mix = model.combine(valid, *alone)
    cross = crossfit_wrong(x, *lp, valid.answer, valid.task)
    rows = []
    for t in tasks:
        n = task_number(t)
        here = valid.task == n
        rows.append({"task": task_name(n), "valid_error": error(mix.logits, valid.answer, here),
                     "crossfit_valid_error": float(cross[here].float().mean()),
                     "share_a": float(mix.share[here].mean()),
                     "valid_error_a": error(lp[0], valid.answer, here), "valid_error_b": error(lp[1], valid.answer, here)})
    return model, error(mix.logits, valid.answer, torch.ones_like(valid.answer, dtype=torch.bool)), rows


def error(logits: Tensor, answer: Tensor, rows: Tensor) -> float:
    """The share of `rows` (N,) bool whose argmax of `logits` (N, A) is not `answer`."""
    return float((logits.argmax(-1) != answer)[rows].float().mean())


def payload(model: Mixture, a: Reader, b: Reader, valid_accuracy: float) -> dict[str, Any]:
    """The mixture's checkpoint (memnet.checkpoint: reader A's config and vocabulary, B's under
    "mixture")."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = checkpoint.model_payload(state, a.cfg, a.vocab, 0, valid_accuracy)
    out["mixture"] = {"config": b.cfg.to_dict(), "vocab": b.vocab.to_dict(), "readers": [str(a.run), str(b.run)]}
    return out


def mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)
