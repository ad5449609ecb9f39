"""Evaluation: a model's answers on a batch, and the metrics and tables made of them.

evaluate(model, batch) -> metrics: answer accuracy, hop accuracy per hop (did hop k attend
the k-th supporting fact), chain accuracy, support recall and hops used, overall and per
task. Shared by the trainer, `memnet eval`, inspect, report and the benchmarks.
"""
from __future__ import annotations

from typing import Any

import torch

from memnet.data import Batch, task_name
from memnet.models import Result


FAILED = 0.05  # a bAbI task fails above 5% test error


def is_failed(error: float) -> bool:
    """Above 5%: 50 wrong of 1,000 is 5.0%, not failed, though float32 stores it as 0.05000001."""
    return error > FAILED + 1e-6


@torch.no_grad()
def predict(model: torch.nn.Module, batch: Batch, chunk: int | None = None) -> Result:
    """The model's result on a whole batch, in eval mode, in chunks of `chunk` questions
    (default: about 2**16 memory slots, a few hundred MB of activations); rows stay in order."""
    was_training = model.training
    if chunk is None:
        chunk = max(1, 2 ** 16 // max(1, batch.story.shape[-2]))
    model.eval()
    try:
        parts = [model(batch.index(slice(i, i + chunk))) for i in range(0, len(batch), chunk)]
    finally:
        model.train(was_training)
    return Result(*(None if xs[0] is None else torch.stack(xs).sum() if xs[0].dim() == 0 else torch.cat(xs)
                    for xs in zip(*parts)))


def accuracy(model: torch.nn.Module, batch: Batch) -> float:
    """Share of the batch's questions answered right (no answer class: wrong)."""
    return float((predict(model, batch).logits.argmax(-1) == batch.answer).double().mean())  # as the kernels count


def _hop_table(result: Result, batch: Batch) -> dict[str, torch.Tensor]:
    """Per question and hop: was the hop taken, does the question have a k-th fact, did the hop find it."""
    N, K, _ = result.attention.shape
    # (N, K) memory slot each hop attended most; -2 (no slot, nor the -1 of a missing fact) for a hop
    # that chose none: every memory masked, its weights all 0 (memnet.models.parts.chosen)
    choice = torch.where(result.attention.amax(-1) > 0, result.attention.argmax(-1), -2)
    taken = torch.arange(K) < result.hops_used[:, None]  # (N, K)
    support = torch.full((N, K), -1, dtype=torch.long)
    n = min(K, batch.support.shape[1])
    support[:, :n] = batch.support[:, :n]  # (N, K) slot of the k-th supporting fact
    has = torch.arange(K) < batch.n_support[:, None]  # (N, K) the question has a k-th fact
    hit = taken & (choice == support) & (support >= 0)  # (N, K)
    need = torch.minimum(result.hops_used, batch.n_support)  # (N,) hops that must be right
    chain = (hit | (torch.arange(K) >= need[:, None])).all(-1)  # (N,)
    found = ((batch.support[:, :, None] == choice[:, None, :]) & taken[:, None, :]).any(-1)  # (N, F)
    found &= batch.support >= 0
    return {"has": has, "hit": hit, "chain": chain, "found": found}


def metrics(result: Result, batch: Batch) -> dict[str, Any]:
    """Accuracy, hop accuracy, chain accuracy, support recall, hops used and each hop's answer
    accuracy (the answer had the model stopped after hop k, taken or not); for a mixture of two
    readers also reader A's mean share (share_a); also per task."""
    correct = result.logits.argmax(-1) == batch.answer  # (N,)
    hop_correct = result.hop_logits.argmax(-1) == batch.answer[:, None]  # (N, K) â_k right
    t = _hop_table(result, batch)

    def summary(rows: torch.Tensor) -> dict[str, Any]:
        n = int(rows.sum())
        has, hit = t["has"][rows], t["hit"][rows]
        facts = int(batch.n_support[rows].sum())
        hops = result.hops_used[rows]
        by_facts: dict[str, dict[str, int]] = {}
        for f, h in zip(batch.n_support[rows].tolist(), hops.tolist()):
            counts = by_facts.setdefault(str(f), {})
            counts[str(h)] = counts.get(str(h), 0) + 1
        accuracy = float(correct[rows].float().mean()) if n else 0.0
        return {
            "n": n,
            "accuracy": accuracy,
            "error": 1.0 - accuracy,
            "hop_accuracy": [float(hit[:, k][has[:, k]].float().mean()) if has[:, k].any() else None
                             for k in range(has.shape[1])],
            "chain_accuracy": float(t["chain"][rows].float().mean()) if n else 0.0,
            "support_recall": float(t["found"][rows].sum()) / facts if facts else None,
            "mean_hops": float(hops.float().mean()) if n else 0.0,
            "mean_facts": float(batch.n_support[rows].float().mean()) if n else 0.0,
            "hops_by_facts": {f: dict(sorted(c.items())) for f, c in sorted(by_facts.items())},
            "hop_answer_accuracy": hop_correct[rows].float().mean(0).tolist() if n else [0.0] * hop_correct.shape[1],
            **({"share_a": float(result.share[rows].mean()) if n else 0.0} if result.share is not None else {}),
        }

    out = summary(torch.ones_like(correct))
    out["tasks"] = {task_name(task): summary(batch.task == task) for task in batch.task.unique().tolist()}
    return out


def evaluate(model: torch.nn.Module, batch: Batch) -> dict[str, Any]:
    """Metrics of a model on a batch (see `metrics`)."""
    result = predict(model, batch.to(next(model.parameters()).device))
    return metrics(Result(*(t if t is None else t.cpu() for t in result)), batch.to("cpu"))


def percents(values: list[float | None]) -> str:
    return " ".join("-" if v is None else f"{100 * v:.1f}" for v in values)


def task_table(m: dict) -> str:
    """One row per task and one for all: questions, accuracy, error, hop accuracy, chain
    accuracy, support recall, mean hops and mean supporting facts; for a mixture, reader A's
    mean share of the answer."""
    share = "share_a" in m
    lines = [f"{'task':>5} {'n':>5} {'acc':>6} {'error':>6} {'hop acc':>20} {'chain':>6} {'recall':>6} {'hops':>5} {'facts':>5}"
             + (f" {'A share':>7}" if share else "")]
    for name, t in [*m["tasks"].items(), ("all", m)]:
        recall = "-" if t["support_recall"] is None else f"{100 * t['support_recall']:.1f}"
        lines.append(f"{name:>5} {t['n']:5d} {100 * t['accuracy']:6.1f} {100 * t['error']:6.1f} "
                     f"{percents(t['hop_accuracy']):>20} {100 * t['chain_accuracy']:6.1f} {recall:>6} "
                     f"{t['mean_hops']:5.2f} {t['mean_facts']:5.2f}" + (f" {t['share_a']:7.2f}" if share else ""))
    return "\n".join(lines)


def hops_table(m: dict) -> str:
    """Hops used against the number of supporting facts, per task: questions, mean hops and how
    many questions took 1..K hops."""
    K = len(m["hop_accuracy"])
    lines = ["hops used by number of supporting facts",
             f"{'task':>5} {'facts':>5} {'n':>5} {'mean':>5} " + " ".join(f"{f'{k} hop' + 's' * (k > 1):>7}" for k in range(1, K + 1))]
    for name, t in m["tasks"].items():
        for facts, counts in t["hops_by_facts"].items():
            n = sum(counts.values())
            mean = sum(int(h) * c for h, c in counts.items()) / n
            lines.append(f"{name:>5} {facts:>5} {n:5d} {mean:5.2f} " + " ".join(f"{counts.get(str(k), 0):7d}" for k in range(1, K + 1)))
    return "\n".join(lines)


def hop_answers_table(m: dict) -> str:
    """Per task, the share of questions each hop's answer gets right: the answer had the model
    stopped after that hop (where the stopping rule answers, and what a later hop adds)."""
    K = len(m["hop_answer_accuracy"])
    lines = ["accuracy (%) of the answer had it stopped after each hop",
             f"{'task':>5} {'n':>5} " + " ".join(f"{f'hop {k}':>6}" for k in range(1, K + 1))]
    for name, t in [*m["tasks"].items(), ("all", m)]:
        lines.append(f"{name:>5} {t['n']:5d} " + " ".join(f"{100 * a:6.1f}" for a in t["hop_answer_accuracy"]))
    return "\n".join(lines)
