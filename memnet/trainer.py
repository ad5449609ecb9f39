"""The training loop: `train(cfg, run) -> metrics`, shared by the CLI, the scripts and the tests.

train.restarts seeds train side by side, each with its own starting weights, data order and
random noise, so each ends as it would alone. Each seed keeps its best weights on validation;
the best seed on validation (never test) is the run's model, evaluated on valid and test.

Who computes the steps is decided once (memnet.kernels.choose): a kernel where its
declaration covers every setting of the run (the Numba kernel, on the CPU), else the
reference model with autograd (ReferenceTraining below; any device). Both expose the same
methods, so the loop below does not know which one it drives:

    epoch(order, ages, lr, batch_size, linear) -> (S,) summed losses
    accuracy(batch, linear) -> (S,)          predict(batch) -> (S, N) answer classes
    answers(batch) -> (S, N) answer classes, (S, N) hops used
    state_dict(s) / load_state_dict(s, state)

The schedule is the paper's: linear start (no attention softmax, linear_start_lr) for the
first epochs where the model has one, then lr halved every lr_decay_every epochs.

`memnet.train(...)`, the Python API's (memnet.api), calls this module's train.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from memnet import babi, checkpoint, distributed, kernels
from memnet.config import Config, ConfigError, from_dict, grid_label
from memnet.data import Batch, Vocab, encode_tasks, read_splits
from memnet.errors import MemnetError, interrupted as ctrl_c
from memnet.evaluation import accuracy, evaluate, predict
from memnet.models import build_model, ensemble_size, restart_model
from memnet.run import RunFolder


class ReferenceTraining:
    """The reference models of S seeds, each trained by autograd and SGD in turn. Under torchrun
    (memnet.distributed) each process computes its share of every batch and DistributedDataParallel
    sums the shares' gradients, so every process takes the whole batch's step."""

    def __init__(self, models: list[torch.nn.Module], data: Batch, *, max_grad_norm: float,
                 world: distributed.World = distributed.World()):
        self.models, self.data, self.max_grad_norm, self.world = models, data, max_grad_norm, world
        self.name = "the reference model (torch autograd)"
        self.replicas = models
        if world.distributed:
            self.name += f" in {world.size} processes (DistributedDataParallel, {distributed.backend()})"
            unused = any(unused_parameters(m, data.index(slice(0, 8)), linear) for m in models[:1] for linear in (True, False))
            self.replicas = [DistributedDataParallel(m, find_unused_parameters=unused) for m in models]

    def epoch(self, order: np.ndarray, ages: np.ndarray, lr: float, batch_size: int, linear: bool) -> np.ndarray:
        losses = []
        for model, replica, seed_order, seed_ages in zip(self.models, self.replicas, order, ages):
            model.train()
            model.linear = linear
            shuffled = self.data.index(torch.from_numpy(seed_order).to(self.data.story.device))
            shuffled.time = torch.from_numpy(seed_ages).to(shuffled.time.device)
            total = torch.zeros(())
            for batch in shuffled.split(batch_size):
                share, weight = self.share(batch)
                loss = replica(share.trim_memory()).loss
                (loss * weight).backward()
                sgd_step(model, lr, self.max_grad_norm)
                total += loss.detach().cpu() * (weight > 0)
            losses.append(total)
        return distributed.summed(torch.stack(losses)).numpy()

    def share(self, batch: Batch) -> tuple[Batch, float]:
        """This process's questions of a batch (rank, rank + W, ...) and the factor on their loss
        that turns DistributedDataParallel's mean of the W gradients into their sum."""
        W = self.world.size
        if W == 1:
            return batch, 1.0
        rows = torch.arange(self.world.rank, len(batch), W, device=batch.story.device)
        if len(rows) == 0:  # fewer questions than processes: one question with no weight keeps the processes in step
            return batch.index(rows.new_zeros(1)), 0.0
        return batch.index(rows), float(W)

    def accuracy(self, batch: Batch, linear: bool = False) -> np.ndarray:
        out = []
        for model in self.models:
            model.linear = linear
            out.append(accuracy(model, batch))
            model.linear = False
        return np.array(out)

    def predict(self, batch: Batch) -> np.ndarray:
        """(S, N) each seed's answer class to each question."""
        return self.answers(batch)[0]

    def answers(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        """(S, N) each seed's answer class to each question, and (S, N) the hops it took."""
        results = [predict(model, batch) for model in self.models]
        return (np.stack([r.logits.argmax(-1).cpu().numpy() for r in results]),
                np.stack([r.hops_used.cpu().numpy() for r in results]))

    def state_dict(self, s: int) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self.models[s].state_dict().items()}

    def load_state_dict(self, s: int, state: dict[str, torch.Tensor]) -> None:
        self.models[s].load_state_dict(state)


def unused_parameters(model: torch.nn.Module, batch: Batch, linear: bool) -> list[str]:
    """The parameters a step leaves without a gradient (a soft-masking penalty with one hop, say):
    DistributedDataParallel must be told there are some, and costs more when told."""
    model.linear = linear
    model(batch.trim_memory()).loss.backward()
    unused = [name for name, p in model.named_parameters() if p.grad is None]
    model.zero_grad(set_to_none=True)
    model.linear = False
    return unused


@torch.no_grad()
def sgd_step(model: torch.nn.Module, lr: float, max_norm: float) -> None:
    """p -= lr · g, with the gradient's norm clipped at max_norm; the gradients are then cleared."""
    params = [p for p in model.parameters() if p.grad is not None]
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    for p in params:
        p.add_(p.grad, alpha=-lr)
        p.grad = None


@dataclass
class Best:
    """Each seed's best validation score and its weights then (-inf and None: none chosen yet),
    its validation accuracy then (-1: none yet), and the sum of its scores over all evaluations;
    which seed is the run's best follows train.restart_choice (by_mean: the highest mean, else
    the highest best; first of equals). The score is the valid accuracy, less what `charge`
    subtracts for the hops where train.hop_cost or train.last_hop_cost is set (see evaluation)."""

    score: np.ndarray
    states: list[dict[str, torch.Tensor] | None]
    epoch: list[int]  # the epoch each best was reached at
    total: np.ndarray  # each seed's valid score summed over its evaluations
    evaluations: int
    by_mean: bool
    accuracy: np.ndarray  # each seed's valid accuracy at its best score

    @classmethod
    def empty(cls, seeds: int, by_mean: bool = False) -> Best:
        return cls(np.full(seeds, -np.inf), [None] * seeds, [0] * seeds, np.zeros(seeds), 0, by_mean, np.full(seeds, -1.0))

    def record(self, valid_acc: np.ndarray, epoch: int, state: Callable[[int], dict[str, torch.Tensor]],
               score: np.ndarray | None = None) -> None:
        """One evaluation's valid accuracies (S,) and scores (S,; default the accuracies): a
        seed scoring as well as its best or better keeps its weights now (of equals, the weights
        trained longest, at the smallest learning rate)."""
        score = valid_acc if score is None else score
        self.total += score
        self.evaluations += 1
        for s in np.flatnonzero(score >= self.score):
            self.score[s], self.accuracy[s], self.states[s], self.epoch[s] = score[s], valid_acc[s], state(s), epoch

    def ranking(self) -> list[int]:
        """The seeds, best first (first of equals)."""
        score = self.total if self.by_mean else self.score
        return sorted(range(len(score)), key=lambda s: (-score[s], s))

    def mean(self) -> np.ndarray:
        """(S,) each seed's mean valid score over its evaluations."""
        return self.total / max(self.evaluations, 1)

    @property
    def seed(self) -> int:
        return self.ranking()[0]

    @property
    def chosen(self) -> bool:
        return self.states[self.seed] is not None


@dataclass
class Loop:
    """What the training loop works with, and what it has done so far."""

    cfg: Config
    vocab: Vocab
    path: Any  # a kernel's Training or ReferenceTraining
    train_data: Batch
    valid: Batch
    generators: list[torch.Generator]  # each seed's data order and random noise
    run: RunFolder | None
    linear_epochs: int  # epochs of linear start before cfg.train.epochs
    say: Callable[[str], None]
    best: Best
    saved: tuple = ()  # the (seed, epoch) of each set of weights model.pt holds
    epoch: int = 0  # epochs done
    step: int = 0  # SGD steps done (per seed)
    stepping: float = 0.0  # seconds spent shuffling and in the training steps
    started: float = field(default_factory=time.perf_counter)

    @property
    def epochs(self) -> int:
        return self.linear_epochs + self.cfg.train.epochs


def load_data(cfg: Config, vocab: Vocab | None = None) -> tuple[dict[str, Batch | None], Vocab]:
    """The run's train, valid and test Batches, and the vocabulary (built from train unless given)."""
    try:
        tasks = babi.parse_tasks(cfg.data.task)
    except ValueError as e:
        raise ConfigError(f"data.{e}") from None
    if not cfg.data.dir:
        raise ConfigError("data.dir: no data folder given (--data DIR)")
    splits = read_splits(cfg.data.dir, tasks, cfg.data.valid_fraction)
    if vocab is None:
        phrases = getattr(cfg.model, "phrase_answers", False)  # each model type's own answer switches
        vocab = Vocab.build((s for ss in splits["train"].values() for s in ss),
                            every_word=getattr(cfg.model, "vocabulary_softmax", False), phrases=phrases)
    data = {name: encode_tasks(s, vocab, cfg.data.memory_size) for name, s in splits.items()}
    data["train"] = data["train"].trim()
    return data, vocab


def device_of(cfg: Config) -> torch.device:
    device = torch.device(cfg.train.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device: {cfg.train.device} is not available here (no CUDA device); use cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("train.device: mps is not available here; use cpu")
    return device


def training_path(cfg: Config, models: list[torch.nn.Module], data: Batch, say,
                  here: distributed.World = distributed.World()) -> Any:
    """The kernel that covers the run, else the reference model; says which and why."""
    if here.distributed:
        if cfg.train.backend not in ("auto", "torch"):
            raise ConfigError(f"train.backend: the {cfg.train.backend} kernel runs in one process; "
                              f"under torchrun use auto or torch")
        path = ReferenceTraining(models, data, max_grad_norm=cfg.train.max_grad_norm, world=here)
        say(f"training on {path.name}: the kernels run in one process only")
        return path
    kernel, why = kernels.choose(cfg)
    if kernel is not None:
        path = kernel.Training(models, data, max_grad_norm=cfg.train.max_grad_norm, threads=cfg.train.threads)
        say(f"training on the {kernel.NAME} kernel: {why}")
    else:
        path = ReferenceTraining(models, data, max_grad_norm=cfg.train.max_grad_norm)
        say(f"training on {path.name}: {why}")
    return path


def schedule(cfg: Config, epoch: int, linear_epochs: int) -> tuple[float, bool]:
    """(learning rate, linear start?) of an epoch (0-based)."""
    tc = cfg.train
    if epoch < linear_epochs:
        return tc.linear_start_lr, True
    return tc.lr * 0.5 ** ((epoch - linear_epochs) // tc.lr_decay_every), False


def random_noise_time(n: int, m: int, share: float, generator: torch.Generator) -> torch.Tensor:
    """Temporal indices (n, m) with empty memories inserted (RN): before each memory, with
    probability `share`, an empty one; every older memory ages by one."""
    blanks = (torch.rand(n, m, generator=generator) < share).long()  # (n, m)
    return torch.arange(m) + blanks.cumsum(1)  # (n, m)


def epoch_order(generators: list[torch.Generator], data: Batch, share: float) -> tuple[np.ndarray, np.ndarray]:
    """Each seed's question order (S, N) and the memories' ages in that order (S, N, M)."""
    N, M = len(data), data.story.shape[1]
    order = torch.stack([torch.randperm(N, generator=g) for g in generators])  # (S, N)
    times = torch.stack([random_noise_time(N, M, share, g) for g in generators])  # (S, N, M)
    ages = times.gather(1, order[..., None].expand(-1, N, M))  # (S, N, M)
    return order.numpy(), ages.numpy()


def log_line(epoch: int, epochs: int, lr: float, loss: float, train_acc: float, valid_acc: float,
             best: float, best_seed: int, seconds: float, mean: float | None = None, label: str = "mean") -> str:
    """One evaluation's line: the chosen seed's accuracies, its best on valid (and with
    train.restart_choice mean and several seeds, its mean on valid, which chose it: its mean
    score where the hops are charged, `label` says which)."""
    best_text = f"{100 * best:5.1f}%" if best >= 0 else "    -"  # none yet during linear start
    seed_text = f"seed {best_seed}" + (f", {label} {100 * mean:.1f}%" if mean is not None and best >= 0 else "")
    return (f"epoch {epoch:4d}/{epochs} | lr {lr:.5f} | loss {loss:7.4f} | train {100 * train_acc:5.1f}% | "
            f"valid {100 * valid_acc:5.1f}% | best {best_text} ({seed_text}) | {seconds:6.1f}s")


def train(cfg: Config, run: RunFolder | None = None, *, progress: bool = True, log: bool = True) -> dict[str, Any]:
    """Train, choose the best restart on validation, evaluate; returns the final metrics
    (valid, test, best_seed, ...), under "model" the chosen model (None when none was chosen:
    interrupted during linear start), under "vocab" its Vocab and under "saved" the checked
    model.pt (or None).
    Ctrl-C stops training, keeps the best model so far, and still evaluates. Under torchrun every
    process trains (memnet.distributed); process 0 alone logs and writes `run`."""
    try:
        return train_here(cfg, run, distributed.world(), progress, log)
    finally:
        distributed.stop()
        if run is not None:
            run.release()


def train_here(cfg: Config, run: RunFolder | None, here: distributed.World, progress: bool, log: bool) -> dict[str, Any]:
    """train() in this process, which is process here.rank of here.size."""
    say = tqdm.write if log else (lambda line: None)
    state = run.read_last() if run is not None and run.resume else None
    if state:  # the run's own config: a resumed run continues, it does not change
        cfg = from_dict(state["config"])
    data, vocab = load_data(cfg, Vocab.from_dict(state["vocab"]) if state else None)
    torch.set_num_threads(cfg.train.threads)
    torch.set_flush_denormal(True)  # near convergence, denormal gradients slow CPU arithmetic tenfold
    device = distributed.device_for(device_of(cfg), here)
    distributed.start(here, device)  # waits for every process: each has read last.pt before process 0 writes it
    if not here.main:
        run, say, progress = None, (lambda line: None), False
    S = cfg.train.restarts
    generators = [torch.Generator().manual_seed(cfg.train.seed + s) for s in range(S)]  # each restart's weights, then data order
    models = [restart_model(cfg, vocab, s, generators[s]).to(device) for s in range(S)]
    same_shapes(cfg, models)
    for s in range(S):
        if grid_label(cfg, s):
            say(f"restart {s}: {grid_label(cfg, s)}")
    train_data = data["train"].to(device)
    linear_epochs = cfg.train.linear_start_epochs if getattr(models[0], "has_linear_start", False) else 0
    loop = Loop(cfg, vocab, training_path(cfg, models, train_data, say, here), train_data, data["valid"].to(device),
                generators, run, linear_epochs, say, Best.empty(S, cfg.train.restart_choice == "mean"))
    if cfg.train.linear_start_epochs and not linear_epochs:
        say(f"linear start: skipped ({cfg.model.type} has no softmax-free phase)")
    if state:
        restore(loop, state)
    if run is not None:
        run.lock()  # before anything is written or removed: a second run into the folder stops here
        run.start(cfg)
    interrupted = False
    try:
        run_epochs(loop, progress)
    except (KeyboardInterrupt, SystemError) as e:
        if not ctrl_c(e):
            raise
        interrupted = True
        say("interrupted: evaluating the weights of now (--resume continues from the last evaluation)")
        evaluation(loop, float("nan"), *schedule(cfg, max(loop.epoch - 1, 0), linear_epochs))
    return finish(loop, data["test"], interrupted)


def same_shapes(cfg: Config, models: list[torch.nn.Module]) -> None:
    """Restarts train side by side, so train.restart_grid may change a model's switches but not
    its parameters' shapes."""
    first = {k: tuple(v.shape) for k, v in models[0].state_dict().items()}
    for s, model in enumerate(models[1:], 1):
        shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        if shapes != first:
            differ = sorted(k for k in first.keys() | shapes.keys() if first.get(k) != shapes.get(k))
            raise ConfigError(f"train.restart_grid: restart {s} ({grid_label(cfg, s)}) has parameters shaped unlike "
                              f"restart 0's ({', '.join(differ)}); a grid may change switches, not sizes")


def run_epochs(loop: Loop, progress: bool) -> None:
    """The epochs from loop.epoch to the end, with an evaluation every train.eval_every."""
    tc = loop.cfg.train
    bar = tqdm(range(loop.epoch, loop.epochs), desc="train", unit="epoch", disable=None if progress else True, leave=False)
    try:
        for epoch in bar:
            began = time.perf_counter()
            lr, linear = schedule(loop.cfg, epoch, loop.linear_epochs)
            order, ages = epoch_order(loop.generators, loop.train_data, tc.random_noise)
            losses = loop.path.epoch(order, ages, lr, tc.batch_size, linear)
            loop.epoch, loop.step = epoch + 1, loop.step + -(-len(loop.train_data) // tc.batch_size)
            loop.stepping += time.perf_counter() - began
            if not np.isfinite(losses).all():
                diverged(loop, losses)
            loss = float(losses.sum()) / len(loop.train_data) / len(losses)  # per question
            bar.set_postfix(loss=f"{loss:.4f}")
            if loop.epoch % tc.eval_every == 0 or loop.epoch == loop.epochs:
                evaluation(loop, loss, lr, linear)
                save_last(loop)
    finally:
        bar.close()


def diverged(loop: Loop, losses: np.ndarray) -> None:
    seeds = ", ".join(str(s) for s in np.flatnonzero(~np.isfinite(losses)))
    kept = (f"{loop.run.model_path} keeps the best weights before it" if loop.run is not None and loop.run.model_path.is_file()
            else "no model was saved")
    raise MemnetError(f"training stopped at epoch {loop.epoch}: the loss of seed {seeds} is not finite "
                      f"(try a smaller train.lr or model.init_std); {kept}")


def charged(cfg: Config) -> bool:
    """Whether choosing on valid charges the hops (train.hop_cost or train.last_hop_cost)."""
    return bool(cfg.train.hop_cost or cfg.train.last_hop_cost)


def charge(cfg: Config, hops: np.ndarray) -> np.ndarray:
    """What choosing on valid subtracts from each question's right answer, for the hops it took
    (any shape): train.hop_cost per hop, and train.last_hop_cost where it took the last hop
    there is (model.hops; a transformer reader's model.layers)."""
    last = cfg.model.hops if hasattr(cfg.model, "hops") else cfg.model.layers
    return cfg.train.hop_cost * hops + cfg.train.last_hop_cost * (hops == last)


def evaluation(loop: Loop, loss: float, lr: float, linear: bool) -> None:
    """Score every seed on train and valid, keep each seed's best weights (never ones trained
    without the softmax: they are not the model a checkpoint holds; see Best.record), save
    when the run's model changed, log one line."""
    best, run = loop.best, loop.run
    valid_acc, train_acc = loop.path.accuracy(loop.valid, linear), loop.path.accuracy(loop.train_data, linear)  # (S,)
    if not linear:
        hops = loop.path.answers(loop.valid)[1] if charged(loop.cfg) else None  # (S, N) the hops each took
        best.record(valid_acc, loop.epoch, loop.path.state_dict,
                    None if hops is None else valid_acc - charge(loop.cfg, hops).mean(1))
    seed = best.seed
    # the run's model changes when a member's weights do, or who the members are
    kept = tuple((s, best.epoch[s]) for s in members(loop))
    if run is not None and best.chosen and kept != loop.saved:
        run.save_model(checkpoint.model_payload(model_state(loop), loop.cfg, loop.vocab, loop.step,
                                                float(best.accuracy[seed]), members(loop)))
        loop.saved = kept
    seconds = time.perf_counter() - loop.started
    mean = float(best.mean()[seed]) if best.by_mean and len(best.total) > 1 else None  # what chose the seed
    loop.say(log_line(loop.epoch, loop.epochs, lr, loss, float(train_acc[seed]), float(valid_acc[seed]),
                      float(best.accuracy[seed]), seed, seconds, mean, "mean score" if charged(loop.cfg) else "mean"))
    if run is not None:
        run.log({"epoch": loop.epoch, "step": loop.step, "lr": lr, "loss": loss, "train_accuracy": train_acc.tolist(),
                 "valid_accuracy": valid_acc.tolist(), "best_valid_accuracy": float(best.accuracy[seed]),
                 "best_seed": seed, "seconds": round(seconds, 3)})


def members(loop: Loop) -> list[int]:
    """The restarts whose weights make the run's model: the best alone, or with train.ensemble
    the ensemble_size best (Best.ranking)."""
    return loop.best.ranking()[:ensemble_size(loop.cfg)]


def model_state(loop: Loop) -> dict[str, torch.Tensor]:
    """The run's model's weights: the best restart's, or with train.ensemble the best weights of
    its members (members.0 the best restart; one not chosen yet stands in with the best's weights)."""
    best = loop.best
    order = members(loop)
    if len(order) == 1:
        return best.states[order[0]]
    return {f"members.{i}.{name}": value for i, s in enumerate(order)
            for name, value in (best.states[s] or best.states[best.seed]).items()}


def save_last(loop: Loop) -> None:
    """RUN/last.pt: everything --resume needs to continue exactly where the loop is."""
    if loop.run is None:
        return
    S = len(loop.generators)
    loop.run.save_last({
        "states": [loop.path.state_dict(s) for s in range(S)], "best_states": loop.best.states,
        "best": loop.best.accuracy.tolist(), "best_score": loop.best.score.tolist(), "best_epoch": loop.best.epoch,
        "valid_total": loop.best.total.tolist(),
        "evaluations": loop.best.evaluations, "epoch": loop.epoch, "step": loop.step,
        "generators": [g.get_state() for g in loop.generators], "config": loop.cfg.to_dict(),
        "vocab": loop.vocab.to_dict()})


def restore(loop: Loop, state: dict[str, Any]) -> None:
    """Continue from a last.pt (see save_last)."""
    for s, weights in enumerate(state["states"]):
        loop.path.load_state_dict(s, weights)
    loop.best.accuracy[:] = state["best"]
    loop.best.score[:] = state.get("best_score", state["best"])  # a last.pt from before train.hop_cost: the accuracies
    loop.best.states, loop.best.epoch = list(state["best_states"]), list(state["best_epoch"])
    # a last.pt from before train.restart_choice has no totals; its config chooses by best
    loop.best.total[:] = state.get("valid_total", 0.0)
    loop.best.evaluations = state.get("evaluations", 0)
    loop.epoch, loop.step = state["epoch"], state["step"]
    for g, s in zip(loop.generators, state["generators"]):
        g.set_state(s)


def finish(loop: Loop, test: Batch | None, interrupted: bool) -> dict[str, Any]:
    """The best seed's model, evaluated on valid and test; the final line of metrics.jsonl."""
    best, device = loop.best, loop.valid.story.device
    result: dict[str, Any] = {"best_seed": best.seed, "valid_accuracy_per_seed": best.accuracy.tolist(),
                              # what chose the seed with restart_choice mean (less the hops' charge, if set)
                              ("mean_valid_score_per_seed" if charged(loop.cfg) else "mean_valid_accuracy_per_seed"):
                                  best.mean().tolist(),
                              "best_epoch": best.epoch[best.seed], "steps": loop.step,
                              "train_questions": len(loop.train_data), "training_path": loop.path.name,
                              "seconds": round(time.perf_counter() - loop.started, 3),
                              "training_seconds": round(loop.stepping, 3), "interrupted": interrupted,
                              "model": None, "saved": None, "vocab": loop.vocab}
    if not best.chosen:  # interrupted during linear start
        return result
    model = build_model(loop.cfg, loop.vocab, restarts=members(loop))
    model.load_state_dict(model_state(loop))
    model.to(device)
    result["valid"] = evaluate(model, loop.valid)
    if test is not None:
        result["test"] = evaluate(model, test)
    if loop.run is not None:
        loop.run.log({"final": True, **{k: v for k, v in result.items() if k not in ("model", "saved", "vocab")}})
        result["saved"] = loop.run.confirm_model()
    result["model"] = model
    return result
