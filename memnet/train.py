"""Training and evaluation: plain functions shared by the CLI, the scripts and the tests.

train(cfg, out_dir) trains cfg.train.restarts seeds side by side (each its own initialisation,
data order and random noise: its result is what it would be trained alone), keeps each seed's
best weights on validation, picks the best seed on validation (never on test) and reports
validation and test metrics. The whole dataset is turned into tensors once; a step is a
handful of batched tensor operations with no Python per example.

evaluate(model, batch) -> metrics: answer accuracy, hop accuracy per hop, chain accuracy,
support recall and hops used, overall and per task.
"""
from __future__ import annotations

import dataclasses
import json
import random
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from memnet import babi, checkpoint, fast
from memnet.config import Config, ConfigError, from_dict
from memnet.data import Batch, Vocab, concat, encode_samples
from memnet.errors import MemnetError
from memnet.model import Result, build_model

# ---------------------------------------------------------------------------- data


def resolve(cfg: Config) -> Config:
    """The config a run actually uses: joint training on several tasks takes the joint settings."""
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model), train=dataclasses.replace(cfg.train),
                              data=dataclasses.replace(cfg.data))
    if len(tasks_of(cfg)) > 1:
        cfg.model.dim, cfg.train.epochs = cfg.train.joint_dim, cfg.train.joint_epochs
        cfg.train.lr_decay_every = cfg.train.joint_lr_decay_every
    return cfg


def tasks_of(cfg: Config) -> list[babi.Task]:
    try:
        return babi.parse_tasks(cfg.data.task)
    except ValueError as e:
        raise ConfigError(f"data.{e}") from None


def read_splits(folder: str | Path, tasks: list[babi.Task], valid_fraction: float = 0.1) -> dict[str, dict]:
    """{split: {task: [Sample]}} for train, valid and test. Without a valid file, the last
    `valid_fraction` of train's stories (in a fixed shuffled order) become validation."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MemnetError(f"{folder}: no such data folder")
    splits: dict[str, dict] = {"train": {}, "valid": {}, "test": {}}
    for task in tasks:
        train = babi.load_split(folder, task, "train")
        if babi.find_task_file(folder, task, "valid"):
            valid = babi.load_split(folder, task, "valid")
        else:
            order = list(range(len(train)))
            random.Random(0).shuffle(order)
            cut = len(train) - max(1, round(len(train) * valid_fraction))
            valid = [train[i] for i in sorted(order[cut:])]
            train = [train[i] for i in sorted(order[:cut])]
        splits["train"][task] = list(babi.samples(train))
        splits["valid"][task] = list(babi.samples(valid))
        test = babi.find_task_file(folder, task, "test")
        splits["test"][task] = list(babi.samples(babi.read_file(test))) if test else []
    return splits


def encode_tasks(samples_by_task: dict, vocab: Vocab, memory_size: int) -> Batch | None:
    parts = [encode_samples(s, vocab, memory_size, task=t) for t, s in samples_by_task.items() if s]
    return concat(parts) if parts else None


# ---------------------------------------------------------------------------- evaluation


@torch.no_grad()
def predict(model: torch.nn.Module, batch: Batch, chunk: int | None = None) -> Result:
    """The model's result on a whole batch, in eval mode, in chunks of `chunk` questions
    (default: about 2**18 memories over all seeds, a few hundred MB of activations); rows stay in order."""
    was_training = model.training
    if chunk is None:
        chunk = max(1, 2 ** 18 // (getattr(model, "seeds", 1) * batch.story.shape[-2]))
    model.eval()
    try:
        parts = [model(batch.index(slice(i, i + chunk))) for i in range(0, len(batch), chunk)]
    finally:
        model.train(was_training)
    seeded = parts[0].logits.dim() == 3  # (S, B, A): several seeds
    return Result(*(None if xs[0] is None else torch.stack(xs).sum() if xs[0].dim() == 0
                    else torch.cat(xs, 1 if seeded else 0) for xs in zip(*parts)))


def _hop_table(result: Result, batch: Batch) -> dict[str, torch.Tensor]:
    """Per question and hop: was the hop taken, does the question have a k-th fact, did the hop find it."""
    N, K, _ = result.attention.shape
    choice = result.attention.argmax(-1)  # (N, K) memory slot each hop attended most
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
    """Accuracy, hop accuracy, chain accuracy, support recall and hops used; also per task."""
    correct = result.logits.argmax(-1) == batch.answer  # (N,)
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
        }

    out = summary(torch.ones_like(correct))
    out["tasks"] = {str(task): summary(batch.task == task) for task in batch.task.unique().tolist()}
    return out


def evaluate(model: torch.nn.Module, batch: Batch) -> dict[str, Any]:
    """Metrics of a one-seed model on a batch (see `metrics`)."""
    result = predict(model, batch.to(next(model.parameters()).device))
    return metrics(Result(*(t if t is None else t.cpu() for t in result)), batch.to("cpu"))


# ---------------------------------------------------------------------------- training


def _random_noise_time(n: int, m: int, share: float, generator: torch.Generator) -> torch.Tensor:
    """Temporal indices (n, m) with empty memories inserted (RN): before each memory, with
    probability `share`, an empty one; every older memory ages by one."""
    blanks = (torch.rand(n, m, generator=generator) < share).long()  # (n, m)
    return torch.arange(m) + blanks.cumsum(1)  # (n, m)


@torch.no_grad()
def _sgd_step(params: list[torch.nn.Parameter], lr: float, max_norm: float) -> None:
    """Plain SGD with each seed's gradient norm clipped on its own (seeds must not share a
    clipping factor); by hand, as torch.optim's bookkeeping costs more than the update."""
    grads = [p.grad for p in params]
    norm = torch.linalg.vector_norm(torch.cat([g.reshape(len(g), -1) for g in grads], 1), dim=1)  # (S,)
    step = (max_norm / (norm + 1e-6)).clamp_(max=1.0).mul_(-lr)  # (S,) -lr times the clipping factor
    for p, g in zip(params, grads):
        p.addcmul_(g, step.view(-1, *[1] * (p.dim() - 1)))
        p.grad = None


def seed_state(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """One seed's parameters as a one-seed model's state_dict (every parameter leads with seeds)."""
    return {name: p.detach()[seed: seed + 1].clone() for name, p in model.state_dict().items()}


def _log_line(epoch: int, epochs: int, lr: float, loss: float, train_acc: float, valid_acc: float,
              best: float, best_seed: int, seconds: float) -> str:
    best_text = f"{100 * best:5.1f}%" if best >= 0 else "    -"  # none yet during linear start
    return (f"epoch {epoch:4d}/{epochs} | lr {lr:.5f} | loss {loss:7.4f} | train {100 * train_acc:5.1f}% | "
            f"valid {100 * valid_acc:5.1f}% | best {best_text} (seed {best_seed}) | {seconds:6.1f}s")


def train(cfg: Config, out_dir: str | Path | None = None, *, resume: bool = False, progress: bool = True,
          log: bool = True) -> dict[str, Any]:
    """Train, choose the best restart on validation, evaluate; returns the final metrics
    (valid, test, best_seed, ...) and, under "model", the chosen one-seed model.

    With out_dir: writes config.yaml (resolved), metrics.jsonl (one line per evaluation),
    model.pt (best weights on validation) and last.pt (everything --resume needs).
    Ctrl-C stops training, saves model.pt, and still evaluates. `progress` shows a bar, `log`
    prints one line per evaluation.
    """
    out = Path(out_dir) if out_dir is not None else None
    state = None
    if resume:
        if out is None or not (out / "last.pt").is_file():
            raise MemnetError(f"{out}: nothing to resume (no last.pt)")
        state = checkpoint.read(out / "last.pt")
        cfg = from_dict(state["config"])  # the run's own config: a resumed run continues, it does not change
    cfg = resolve(cfg)
    tc = cfg.train
    torch.set_num_threads(tc.threads)
    torch.set_flush_denormal(True)  # near convergence, denormal gradients slow CPU arithmetic tenfold
    if not cfg.data.dir:
        raise ConfigError("data.dir: no data folder given (--data DIR)")

    splits = read_splits(cfg.data.dir, tasks_of(cfg), cfg.data.valid_fraction)
    vocab = Vocab.from_dict(state["vocab"]) if state else Vocab.build(
        (s for ss in splits["train"].values() for s in ss), every_word=cfg.model.vocabulary_softmax,
        phrases=cfg.model.phrase_answers)
    data = {name: encode_tasks(s, vocab, cfg.data.memory_size) for name, s in splits.items()}
    if data["train"] is None or data["valid"] is None:
        raise MemnetError(f"{cfg.data.dir}: no training questions for task {cfg.data.task}")
    device = torch.device(tc.device)

    S = tc.restarts
    model = build_model(cfg.model, len(vocab), len(vocab.answers), answer_words=vocab.answer_words(),
                        memory_size=cfg.data.memory_size, seeds=S, attention_supervision=tc.attention_supervision)
    # a model may turn a dataset into what it reads once, not at every step (MemN2N: bags of words)
    prepare = getattr(model, "prepare", lambda batch: batch)
    train_data, valid_data = prepare(data["train"].trim().to(device)), prepare(data["valid"].to(device))
    generators = [torch.Generator().manual_seed(tc.seed + s) for s in range(S)]
    model.reset_parameters(generators)
    model.to(device)
    params = [p for p in model.parameters()]
    best = torch.full((S,), -1.0)  # each seed's best validation accuracy
    best_params = {k: v.detach().clone() for k, v in model.state_dict().items()}
    start_epoch, step = 0, 0
    if state:
        model.load_state_dict(state["state_dict"])
        best_params, best = {k: v.to(device) for k, v in state["best_state"].items()}, state["best"]
        start_epoch, step = state["epoch"], state["step"]
        for g, s in zip(generators, state["generators"]):
            g.set_state(s)

    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        babi.atomic_write(out / "config.yaml", cfg.to_yaml())
        if not resume:
            (out / "metrics.jsonl").unlink(missing_ok=True)

    def save_last(epoch: int) -> None:
        if out is not None:
            checkpoint.write(out / "last.pt", {
                "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
                "best_state": best_params, "best": best, "epoch": epoch, "step": step,
                "generators": [g.get_state() for g in generators],
                "config": cfg.to_dict(), "vocab": vocab.to_dict()})

    def seed_accuracy(batch: Batch, split: str) -> torch.Tensor:
        """(S,) each seed's accuracy on a split: with the compiled loops when they train the model."""
        if stepper is None:
            return _seed_accuracy(model, batch)
        return torch.from_numpy(stepper.accuracy(questions[split], model.linear)).float()

    def evaluation(epoch: int, loss: float, started: float) -> None:
        """Score every seed on train and valid, keep each seed's best weights, log one line."""
        nonlocal best
        valid_acc = seed_accuracy(valid_data, "valid")  # (S,)
        train_acc = seed_accuracy(train_data, "train")  # (S,)
        improved = valid_acc > best
        if model.linear:  # weights trained without the softmax are not the model the checkpoint holds
            improved[:] = False
        if improved.any():
            now = model.state_dict()
            for k in best_params:
                mask = improved.to(now[k].device)
                best_params[k][mask] = now[k].detach()[mask]
            best = torch.where(improved, valid_acc, best)
        seed = int(best.argmax())
        if out is not None and improved[seed]:
            checkpoint.write(out / "model.pt", {"state_dict": {k: v[seed: seed + 1].clone() for k, v in best_params.items()},
                                                "config": cfg.to_dict(), "vocab": vocab.to_dict(), "step": step,
                                                "best_metric": float(best[seed])})
        line = _log_line(epoch, epochs, lr, loss, float(train_acc[seed]), float(valid_acc[seed]),
                         float(best[seed]), seed, time.perf_counter() - started)
        if log:
            tqdm.write(line)
        if out is not None:
            record = {"epoch": epoch, "step": step, "lr": lr, "loss": loss, "train_accuracy": train_acc.tolist(),
                      "valid_accuracy": valid_acc.tolist(), "best_valid_accuracy": float(best[seed]), "best_seed": seed,
                      "seconds": round(time.perf_counter() - started, 3)}
            with open(out / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    stepper = None  # the compiled training loop, where it covers the model (memnet.fast)
    if tc.backend != "torch":
        why = fast.unsupported(model, device)
        if why is None:
            stepper = fast.Stepper(model, train_data, tc.max_grad_norm, tc.threads)
            questions = {"train": stepper.data, "valid": fast.Questions(valid_data, cfg.model.encoding)}
        elif tc.backend == "numba":
            raise ConfigError(f"train.backend: numba does not cover {why}; use auto or torch")
        elif log:  # say why this run is slower than the others
            tqdm.write(f"training with the torch step: the compiled loop does not cover {why}")

    N, M = len(train_data), train_data.story.shape[1]
    # linear start, before the schedule: no attention softmax, at linear_start_lr (a model
    # without a softmax-free phase, the transformer, skips it)
    linear_epochs = tc.linear_start_epochs if getattr(model, "has_linear_start", False) else 0
    epochs = linear_epochs + tc.epochs
    lr = tc.linear_start_lr if linear_epochs else tc.lr
    batch_size = tc.batch_size
    started = time.perf_counter()
    stepping = 0.0  # seconds spent shuffling and in the training steps (the rest: evaluating, saving)
    interrupted = False
    epoch = start_epoch
    bar = tqdm(range(start_epoch, epochs), desc="train", unit="epoch", disable=None if progress else True, leave=False)  # None: off when not a terminal
    try:
        for epoch in bar:
            began = time.perf_counter()
            model.linear = epoch < linear_epochs
            lr = tc.linear_start_lr if model.linear else tc.lr * 0.5 ** ((epoch - linear_epochs) // tc.lr_decay_every)
            order = torch.stack([torch.randperm(N, generator=g) for g in generators]).to(device)  # (S, N) each seed's data order
            times = torch.stack([_random_noise_time(N, M, tc.random_noise, g) for g in generators]).to(device)  # (S, N, M)
            ages = times.gather(1, order[..., None].expand(S, N, M))  # (S, N, M) this epoch's ages, in that order
            if stepper is not None:
                total, steps = stepper.epoch(order.numpy(), ages.numpy(), lr, batch_size, model.linear)
                step += steps
            else:
                shuffled = train_data.index(order)  # fields (S, N, ...): each seed's epoch, shuffled once
                shuffled.time = ages
                total = torch.zeros((), device=device)
                for batch in shuffled.split(batch_size, 1):  # fields (S, B, ...): views
                    loss = model(batch.trim_memory()).loss
                    loss.backward()
                    _sgd_step(params, lr, tc.max_grad_norm)
                    total += loss.detach()
                    step += 1
            epoch_loss = float(total) / N / S  # per question
            stepping += time.perf_counter() - began
            bar.set_postfix(loss=f"{epoch_loss:.4f}")
            if (epoch + 1) % tc.eval_every == 0 or epoch + 1 == epochs:
                evaluation(epoch + 1, epoch_loss, started)
                save_last(epoch + 1)
    except KeyboardInterrupt:
        interrupted = True
        tqdm.write("interrupted: saving and evaluating (--resume continues from the last evaluation)")
        evaluation(epoch, float("nan"), started)
    finally:
        bar.close()

    seed = int(best.argmax())
    final = build_model(cfg.model, len(vocab), len(vocab.answers), answer_words=vocab.answer_words(),
                        memory_size=cfg.data.memory_size, seeds=1)
    final.load_state_dict({k: v[seed: seed + 1] for k, v in best_params.items()})
    final.to(device)
    result: dict[str, Any] = {"best_seed": seed, "valid_accuracy_per_seed": best.tolist(), "steps": step, "train_questions": N,
                              "seconds": round(time.perf_counter() - started, 3),
                              "training_seconds": round(stepping, 3), "interrupted": interrupted,
                              "valid": evaluate(final, valid_data)}
    if data["test"] is not None:
        result["test"] = evaluate(final, data["test"])
    if out is not None:
        with open(out / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"final": True, **result}) + "\n")
    result["model"] = final
    return result


@torch.no_grad()
def _seed_accuracy(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """(S,) answer accuracy of each seed of a (multi-seed) model."""
    result = predict(model, batch)
    logits = result.logits if result.logits.dim() == 3 else result.logits[None]  # (S, N, A)
    return (logits.argmax(-1) == batch.answer).float().mean(-1).cpu()
