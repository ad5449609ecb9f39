"""Two trained readers, one answer: a gate over the question's words mixes their answer distributions.

The memory network answers the chains (qa2, qa3, qa16) that the word reader cannot, and the word
reader answers the tasks that turn on which fact names which thing (qa17, qa18) that the memory
network cannot (docs/results.md). Each is trained on the same tasks by itself; the mixture is

    g(q) = σ(w · x(q) + c)                       x(q): which vocabulary words the question has
    p(a | story, q) = g(q) p_A(a) + (1 − g(q)) p_B(a)

with w and c fitted, the readers frozen, by maximum likelihood of the right answers on held-out
questions (with --confidence, x(q) also holds each reader's top probability, max_a p(a); it was
not lower on valid, experiments/README.md). On the questions a reader was trained on, both are
right almost everywhere (a joint memory network is 97.7% right on its training questions and 90%
on valid), so the training questions cannot tell the gate which reader to trust; questions
neither reader has seen can. The gate sees no task number: only the question's words.

`python -m experiments.readers.mix RUN_A RUN_B --out RUN` (load_pair, fit, payload; from the
repository root) writes the mixture as a checkpoint of model.type mixture that `memnet eval`,
`inspect` and `ask` load like any other with this plug-in loaded (MEMNET_PLUGINS=experiments.readers);
mix_readers.py scores it as a column of the benchmark.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from experiments.readers.config import MixtureConfig
from experiments.readers.mixture import Mixture, confidences, gate_inputs, mixed, question_words, word_map
from memnet import babi, checkpoint, official
from memnet.cli import Parser
from memnet.cli.common import data_folder
from memnet.config import Config, DataConfig
from memnet.data import Batch, Vocab, encode_tasks, read_splits, task_name, task_number
from memnet.errors import MemnetError
from memnet.evaluation import predict
from memnet.models import Result

__all__ = ["Gate", "Reader", "as_reader", "check_pair", "crossfit_wrong", "answers", "confidences", "error", "fit",
           "gate_inputs", "join", "load_pair", "load_reader", "log_probs", "mixed", "mixture_config", "payload",
           "question_words", "readers"]


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


def crossfit_wrong(x: Tensor, logp_a: Tensor, logp_b: Tensor, answer: Tensor, tasks: Tensor,
                   inner: list[tuple[Tensor, ...]] | None = None) -> Tensor:
    """(N,) bool: each question answered wrong by a gate fitted on the other half of its task's
    questions (alternate questions of each task in two halves), so that the gate's own valid
    error is not its fit to the questions it is scored on. `inner`, where reader A is itself a
    mixture (a cascade): the gates inside it, innermost first, each as its inputs and its reader
    B's log-probabilities, the innermost with its reader A's too, [(x, logp_a, logp_b), (x, logp_b),
    ...], so that each of them too is fitted on the other half only (logp_a is then the mixture
    they make, refitted level by level)."""
    half = torch.zeros(len(answer), dtype=torch.bool)
    for t in tasks.unique():
        rows = (tasks == t).nonzero()[:, 0]
        half[rows[::2]] = True
    wrong = torch.zeros(len(answer), dtype=torch.bool)
    for part in (half, ~half):
        if inner:
            (xi, below, inner_b), *outer = inner
            for xi, inner_b in [(xi, inner_b), *outer]:  # each gate over the mixture below it, refitted
                gate = Gate(xi.shape[1]).fit(xi[~part], below[~part], inner_b[~part], answer[~part])
                below = gate.mix(xi, below, inner_b)
            logp_a = below
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
    trained on the same tasks with the same answers and words, and B keeps no more memories than A."""
    a, b = load_reader(run_a), load_reader(run_b)
    if isinstance(b.model, Mixture):
        raise MemnetError(f"{b.run}: already a mixture of two readers; mix it as reader A (a cascade), or two trained runs")
    check_pair(a, b)
    return a, b


def load_reader(run: str | Path) -> Reader:
    """A run folder's model (RUN/model.pt), config and vocabulary."""
    return Reader(Path(run), *checkpoint.load(Path(run) / "model.pt")[:3])


def check_pair(a: Reader, b: Reader) -> None:
    """Refused with a clear error unless the two readers were trained on the same tasks with the
    same answers and words, and B keeps no more memories than A (B reads A's most recent ones)."""
    if a.cfg.data.task != b.cfg.data.task:
        raise MemnetError(f"{a.run} was trained on tasks {a.cfg.data.task}, {b.run} on {b.cfg.data.task}")
    if a.vocab.answers != b.vocab.answers:
        raise MemnetError(f"{a.run} and {b.run} have different answer classes: not trained on the same data")
    extra = sorted(set(b.vocab.itos) - set(a.vocab.itos))
    if extra:
        raise MemnetError(f"{b.run} knows words {a.run} never saw ({' '.join(extra[:5])}): not trained on the same data")
    if b.cfg.data.memory_size > a.cfg.data.memory_size:
        raise MemnetError(f"{a.run} reads {a.cfg.data.memory_size} memories, {b.run} {b.cfg.data.memory_size}: "
                          f"reader B reads the most recent of A's; train it with no larger data.memory_size, or "
                          f"swap the two")


def join(a: Reader, b: Reader, confidence: bool = False) -> Mixture:
    """The two readers as one model, the gate at g = 1/2 (with `confidence`, reading their top probabilities too)."""
    return Mixture(a.model, b.model, word_map(a.vocab, b.vocab), (a.cfg.model.type, b.cfg.model.type),
                   confidence, b.cfg.data.memory_size).eval()


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


def fit(a: Reader, b: Reader, valid: Batch, tasks: list,
        confidence: bool = False) -> tuple[Mixture, float, list[dict[str, Any]]]:
    """The mixture of the two readers with its gate fitted on `valid` (a Batch in A's words), each
    reader answering valid once; with the mixture's error on all of valid, and per task: its error
    (its gate fitted on these questions), the cross-fitted error (each question scored by a gate
    fitted on the other half of its task's questions; where A is itself a mixture, its gate too),
    reader A's mean share and each reader's error alone."""
    model = join(a, b, confidence)
    alone = readers(model, valid)
    lp = log_probs(*alone)
    x = gate_inputs(valid, len(a.vocab), *lp, confidence)
    gate = Gate(x.shape[1]).fit(x, *lp, valid.answer)
    model.gate_w.copy_(gate.w)
    model.gate_c.copy_(gate.c)
    with torch.no_grad():
        mix = model.combine(valid, *alone)
    # a cascade: the gates inside reader A are fitted on each half alone too
    inner = inner_gates(a.model, valid, len(a.vocab)) if isinstance(a.model, Mixture) else None
    cross = crossfit_wrong(x, *lp, valid.answer, valid.task, inner)
    rows = []
    for t in tasks:
        n = task_number(t)
        here = valid.task == n
        rows.append({"task": task_name(n), "valid_error": error(mix.logits, valid.answer, here),
                     "crossfit_valid_error": float(cross[here].float().mean()),
                     "share_a": float(mix.share[here].mean()),
                     "valid_error_a": error(lp[0], valid.answer, here), "valid_error_b": error(lp[1], valid.answer, here)})
    return model, error(mix.logits, valid.answer, torch.ones_like(valid.answer, dtype=torch.bool)), rows


def inner_gates(model: Mixture, valid: Batch, vocab_size: int) -> list[tuple[Tensor, ...]]:
    """crossfit_wrong's `inner` for a mixture used as reader A: its gates, innermost first."""
    lp = log_probs(*readers(model, valid))
    x = gate_inputs(valid, vocab_size, *lp, model.confidence)
    if isinstance(model.a, Mixture):
        return inner_gates(model.a, valid, vocab_size) + [(x, lp[1])]
    return [(x, *lp)]


def error(logits: Tensor, answer: Tensor, rows: Tensor) -> float:
    """The share of `rows` (N,) bool whose argmax of `logits` (N, A) is not `answer`."""
    return float((logits.argmax(-1) != answer)[rows].float().mean())


def payload(model: Mixture, a: Reader, b: Reader, valid_accuracy: float) -> dict[str, Any]:
    """The mixture's checkpoint (memnet.checkpoint): a config of model.type mixture holding both
    readers' configs and B's vocabulary, reader A's data section and vocabulary; `readers`, the
    two run folders."""
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = checkpoint.model_payload(state, mixture_config(model, a, b), a.vocab, 0, valid_accuracy)
    out["readers"] = [str(a.run), str(b.run)]
    return out


def mixture_config(model: Mixture, a: Reader, b: Reader) -> Config:
    """The mixture's config: model.type mixture holding both readers' configs and B's
    vocabulary, and reader A's data section."""
    model_cfg = MixtureConfig(a=json.dumps(a.cfg.to_dict()), b=json.dumps(b.cfg.to_dict()),
                              b_vocab=json.dumps(b.vocab.to_dict()), confidence=model.confidence)
    return Config(data=DataConfig(**vars(a.cfg.data)), model=model_cfg)


def as_reader(model: Mixture, a: Reader, b: Reader) -> Reader:
    """The fitted mixture as reader A of another mixture (a cascade): reader A's run, training
    section and vocabulary."""
    return Reader(a.run, model, dataclasses.replace(mixture_config(model, a, b), train=a.cfg.train), a.vocab)


def mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)


def main(argv: list[str] | None = None) -> int:
    """Mix two runs into one model: RUN/model.pt and RUN/metrics.jsonl; status 2 and one line on a
    user's error, as memnet's commands."""
    parser = Parser(
        prog="python -m experiments.readers.mix",
        description="Mix two runs trained on the same tasks (say a joint memory network and a joint word "
                    "reader, model.type words) into one model: p = g p_A + (1 - g) p_B, the gate g = σ(w · x + c) "
                    "over the question's words x, fitted on the valid split with both readers frozen. Writes "
                    "RUN/model.pt, which memnet eval, inspect and ask load like any checkpoint with "
                    "MEMNET_PLUGINS=experiments.readers (the attention they show is reader A's), and RUN/metrics.jsonl.")
    parser.add_argument("a", metavar="RUN_A", help="run folder of reader A (memnet train --out): its hops are the ones shown")
    parser.add_argument("b", metavar="RUN_B", help="run folder of reader B, trained on the same tasks and data")
    parser.add_argument("--out", required=True, help="run folder to write (refused if it holds another run, unless --force)")
    parser.add_argument("--data", help="folder of bAbI files (default: the folder reader A was trained on)")
    parser.add_argument("--confidence", action="store_true",
                        help="the gate also reads each reader's top probability (how sure it is of its answer)")
    parser.add_argument("--force", action="store_true", help="replace the run in --out")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    try:
        return run(args)
    except MemnetError as e:
        print(f"mix: error: {e}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    from memnet.run import RunFolder, strict

    out = Path(args.out)
    for run_folder in (args.a, args.b):
        if out.resolve() == Path(run_folder).resolve():
            raise MemnetError(f"{out}: is reader {run_folder}'s own run folder; choose another --out")
    folder = RunFolder(out, force=args.force)  # refused before any work when it holds another run
    a, b = load_pair(args.a, args.b)
    data = data_folder(official.resolve_data_dir(args.data) if args.data else None, a.cfg.data.dir, a.run)
    tasks = babi.parse_tasks(a.cfg.data.task)
    samples = read_splits(data, tasks, a.cfg.data.valid_fraction)["valid"]
    valid = encode_tasks(samples, a.vocab, a.cfg.data.memory_size)
    if valid is None:
        raise MemnetError(f"{data}: no valid questions for task {a.cfg.data.task}: the gate is fitted on them")
    unknown = a.vocab.unknown(s for ss in samples.values() for s in ss)
    if unknown:
        print(f"mix: {len(unknown)} word(s) the readers never saw read as <unk>: {' '.join(unknown[:20])}",
              file=sys.stderr)
    model, err, rows = fit(a, b, valid, tasks, args.confidence)
    folder.make()
    folder.save_model(payload(model, a, b, 1 - err))
    checkpoint.load(folder.model_path)  # read back: a written mixture loads
    folder.log(strict({"mixture": [str(a.run), str(b.run)], "readers": list(model.names), "data": str(data),
                       "valid_error": err, "tasks": rows}))
    print(f"{'task':>5} {'valid':>6} {'cross':>6} {'A':>6} {'B':>6} {'A share':>7}   (valid error %: the mixture, "
          f"its gate fitted on the other half, each reader alone)")
    for r in rows:
        print(f"{r['task']:>5} {100 * r['valid_error']:6.1f} {100 * r['crossfit_valid_error']:6.1f} "
              f"{100 * r['valid_error_a']:6.1f} {100 * r['valid_error_b']:6.1f} {r['share_a']:7.2f}")
    print(f"{'mean':>5} " + " ".join(f"{100 * mean(rows, k):6.2f}" for k in
                                     ("valid_error", "crossfit_valid_error", "valid_error_a", "valid_error_b")))
    print(f"wrote {folder.model_path} ({model.names[0]} and {model.names[1]}); test it: "
          f"MEMNET_PLUGINS=experiments.readers memnet eval --checkpoint {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
