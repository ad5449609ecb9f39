"""MemN2N's training step and forward pass compiled with Numba: the same numbers as the
reference model (memnet/models/memn2n.py) and the trainer's SGD step, without their
per-operation cost. This file holds the declaration and the host side; the compiled loops are in
numba_forward.py (the forward pass), numba_backward.py (its gradient) and numba_step.py (an
epoch of SGD steps).

A step of the paper's model (d = 20, batch 32, stories of ten sentences) is a few hundred
thousand multiply-adds. PyTorch spends ~5 µs dispatching each of its ~400 operations per
step, NumPy ~2 µs for each of ~100; the arithmetic itself takes less than either. So whole
epochs run here, per question, with the sentences kept sparse (word ids and their
position-encoding weights a_j, c_j, so that l_kj = a_j + e_k c_j):

    x[i, t] = Σ_j l_j · emb[w_ij, table t] + T(age_i)[table t]      m_i (t = A^k), c_i (t = C^k)

emb (V, n_tables * d) holds the reference model's tables side by side, [A^1 = B, C^1 = A^2,
..., C^K = W^T] with adjacent tying, [B, A, C, W^T] with layer-wise tying. Slot 0 holds the
question (only its table 0 is used; with model.question_table offset, u^1 = (A^1 + B') q, B'
an array of its own that alone takes the question's gradient; else B' is a (1, 1) of zeros that
no loop reads); with the null memory it is also the empty memory every hop may attend to: score
0, and nothing to read. Every part absent from a run is an array of zeros no loop reads: the
answer module U (2d, H), b (H,), V (H, A); the pointer in time w (K-1, 2D+1) and, with
model.relative_query, r (K-1, 2D+1, d); the mixed attention's gates g (K,).

Restarts train side by side: every array has a leading seed dimension S, and each seed's
epoch runs on its own thread when train.threads > 1 (the loops run without Python's lock).
A restart grid may give the seeds different switches (memnet.config.restart_config): each
seed's flags and loss weights are its own model's.

COVERS declares, as data, every configuration this kernel computes exactly as the reference
does; the trainer uses it only for a run whose every setting is covered (memnet.kernels).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

from memnet.data import Batch
from memnet.kernels import ANY
from memnet.kernels.numba_forward import _seed_predict
from memnet.kernels.numba_step import _seed_epoch

NAME = "numba"
COVERS = {
    "model.type": ("memn2n",),
    "model.dim": ANY,
    "model.hops": ANY,
    "model.encoding": ("bow", "pe"),
    "model.temporal": (True, False),
    "model.tying": ("adjacent", "layerwise"),
    "model.masking": ("off", "hard", "soft", "second"),
    "model.answer_from": ("state", "readout", "question"),
    "model.null_memory": (True, False),
    "model.stopping": (True, False),
    "model.halt_cost": ANY,
    "model.halt_threshold": ANY,
    "model.halt_confidence": ANY,
    "model.halt_init": ANY,
    "model.halt_training": ("expected", "right", "right_last"),
    "model.question_table": ("tied", "offset"),
    "model.attention": ("softmax", "stick", "mixed"),
    "model.early_answers": ANY,
    "model.early_answers_hop1": ANY,
    "model.mask_init": ANY,
    "model.stick_init": ANY,
    "model.relative_time": ANY,
    "model.relative_query": (True, False),
    "model.answer_hidden": ANY,
    "model.vocabulary_softmax": (True, False),
    "model.phrase_answers": (True, False),
    "data.memory_size": ANY,
    "train.batch_size": ANY,
    "train.max_grad_norm": ANY,
    "train.attention_supervision": ANY,
    "train.threads": ANY,
    "train.device": ("cpu",),
}


class Questions:
    """A Batch as the compiled loops read it: per question, its slots (0 the question, then its
    memories, most recent first) as word ids with their position-encoding weights (a_j, c_j)."""

    def __init__(self, data: Batch, encoding: str):
        L = max(data.story.shape[-1], data.query.shape[-1])
        words = torch.cat([F.pad(data.query, (0, L - data.query.shape[-1]))[:, None],
                           F.pad(data.story, (0, L - data.story.shape[-1]))], 1)  # (N, M+1, L) slot 0 the question
        real = words != 0  # real words come first
        n_words = real.sum(-1)  # (N, M+1)
        r = torch.arange(1, L + 1) / n_words.clamp(min=1)[..., None]  # (N, M+1, L) j/J
        if encoding == "pe":
            coef = torch.stack([1 - r, 2 * r - 1], -1)  # (N, M+1, L, 2) a_j = 1 - j/J, c_j = 2j/J - 1
        else:
            coef = torch.stack([torch.ones_like(r), torch.zeros_like(r)], -1)  # bag of words: l_j = 1
        self.words = words.int().numpy()  # (N, M+1, L)
        self.coef = (coef * real[..., None]).float().numpy()  # (N, M+1, L, 2)
        self.n_words = n_words.int().numpy()  # (N, M+1)
        self.length = data.length.int().numpy()  # (N,)
        self.ages = data.time.numpy().astype(np.int64)  # (N, M) each memory's age when not training
        self.answer = data.answer.int().numpy()  # (N,)
        self.support = data.support.int().numpy()  # (N, F) memory index of each supporting fact, -1: none
        self.n_support = data.n_support.int().numpy()  # (N,)


# the reference model's parameter names, and the arrays that hold them here (each with a seed dimension)
ARRAYS = {"tables": "emb", "temporal": "temporal", "H": "H", "question_table": "question", "halting.w": "halt_w",
          "halting.b": "halt_b", "masking.log_penalty": "log_penalty", "answer.U": "answer_in", "answer.b": "answer_b",
          "answer.V": "answer_out", "pointer.w": "relative", "pointer.r": "relative_q", "attention.gate": "gate"}


class Training:
    """Trains S reference models' weights side by side (a copy, as arrays with a leading seed
    dimension), on the training Batch `data`; scores them on any Batch. `state_dict(s)` gives
    seed s back as the reference model's state_dict."""

    name = NAME

    def __init__(self, models: list[torch.nn.Module], data: Batch, *, max_grad_norm: float, threads: int = 1):
        first, cfg = models[0], models[0].cfg
        # each restart's model: a restart grid may give them different switches, never different shapes
        self.models, self.model, self.max_grad_norm, self.threads = models, first, max_grad_norm, threads
        self.K, self.d, self.n_tables = first.hops, first.dim, first.n_tables
        V, S, Td, K, d = first.tables.shape[1], len(models), first.n_tables * first.dim, first.hops, first.dim
        hidden, n_answers, D = cfg.answer_hidden, first.answer_bag.shape[0], cfg.relative_time

        def zeros(*shape: int) -> np.ndarray:
            return np.zeros((S, *shape), np.float32)

        self.emb, self.temporal = zeros(V, Td), zeros(first.memory_size if cfg.temporal else 0, Td)
        self.halt_w, self.halt_b, self.H, self.log_penalty = zeros(d), zeros(1), zeros(d, d), zeros(1)
        self.answer_in, self.answer_b, self.answer_out = zeros(2 * d, hidden), zeros(hidden), zeros(hidden, n_answers)
        self.relative = zeros(max(K - 1, 0), 2 * D + 1)  # w^k, hops 2..K (read only with model.relative_time)
        self.relative_q = zeros(max(K - 1, 0), *((2 * D + 1, d) if cfg.relative_query else (1, 1)))  # r^k
        self.question = zeros(*((V, d) if cfg.question_table == "offset" else (1, 1)))  # B' of A^1 + B'
        self.gate = zeros(K)  # attention mixed: each hop's g_k
        for s, model in enumerate(models):
            self.load_state_dict(s, model.state_dict())
        self.answer_bag = first.answer_bag.numpy()  # (A, V) the words of each answer class
        self.data = Questions(data, first.encoding)
        # the Batches scored again and again, by id, each kept alive beside its Questions so
        # that its id cannot be reused by another Batch
        self.questions: dict[int, tuple[Batch, Questions]] = {id(data): (data, self.data)}

    def flags(self, s: int) -> tuple:
        """Seed s's switches, as the compiled loops take them (after linear start's)."""
        m = self.models[s].cfg
        # masking: 0 off or soft, 1 hard, 2 second (soft, and hop 2 blocked from hop 1's choice)
        masking = {"hard": 1, "second": 2}.get(m.masking, 0)
        right = m.stopping and m.halt_training in ("right", "right_last")
        return (m.tying == "layerwise", masking, m.masking in ("soft", "second"), m.null_memory,
                m.answer_from == "readout", m.answer_from == "question", m.stopping, right,
                m.stopping and m.halt_training == "right_last", m.question_table == "offset",
                m.attention == "stick", m.attention == "mixed")

    def load_state_dict(self, s: int, state: dict[str, torch.Tensor]) -> None:
        """Seed s's arrays from a reference model's state_dict."""
        n, d = self.n_tables, self.d
        for name, value in state.items():
            if name in ("tables", "temporal"):  # (n_tables, rows, d) -> (rows, n_tables * d)
                getattr(self, ARRAYS[name])[s] = value.transpose(0, 1).reshape(-1, n * d).numpy()
            else:
                array = getattr(self, ARRAYS[name])
                array[s] = value.numpy().reshape(array[s].shape)

    def state_dict(self, s: int) -> dict[str, torch.Tensor]:
        """Seed s as the reference model's state_dict (copies)."""
        n, d = self.n_tables, self.d
        out = {}
        for name, value in self.model.state_dict().items():
            array = getattr(self, ARRAYS[name])[s]
            if name in ("tables", "temporal"):
                array = array.reshape(-1, n, d).transpose(1, 0, 2)
            out[name] = torch.from_numpy(np.ascontiguousarray(array.reshape(value.shape))).clone()
        return out

    def epoch(self, order: np.ndarray, ages: np.ndarray, lr: float, batch_size: int, linear: bool) -> np.ndarray:
        """One pass over the data: order (S, N) each seed's question order, ages (S, N, M) each
        question's memory ages in that order. Returns each seed's summed loss (S,)."""
        data = self.data
        order, ages = order.astype(np.int64, copy=False), ages.astype(np.int64, copy=False)
        batches = (data.words, data.coef, data.n_words, data.length, data.answer, data.support, data.n_support)

        def seed_epoch(s: int) -> float:
            m = self.models[s].cfg
            hyper = (np.float32(lr), np.float32(m.halt_cost), np.float32(self.models[s].supervision),
                     np.float32(self.max_grad_norm), np.float32(m.early_answers), np.float32(m.halt_threshold),
                     np.float32(m.early_answers if m.early_answers_hop1 < 0 else m.early_answers_hop1))
            return _seed_epoch(self._params(s), self.answer_bag, batches, order[s], ages[s], batch_size,
                               (linear, *self.flags(s)), hyper, self.K, self.d)

        return np.array(self._each_seed(seed_epoch))

    def predict(self, batch: Batch, linear: bool = False) -> np.ndarray:
        """(S, N) each seed's answer class to each question, as the reference model answers in
        eval mode (the stopping rule at halt_threshold and halt_confidence); `linear` as during linear start."""
        return self.answers(batch, linear)[0]

    def answers(self, batch: Batch, linear: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """predict's (S, N) answer classes, and (S, N) the hops each seed took on each question
        (the stopping rule's; else model.hops)."""
        q = self._questions(batch)

        def seed_predict(s: int) -> tuple[np.ndarray, np.ndarray]:
            m = self.models[s].cfg
            return _seed_predict(self._params(s), self.answer_bag, q.words, q.coef, q.n_words, q.length, q.ages,
                                 (linear, *self.flags(s)), np.float32(m.halt_threshold), np.float32(m.halt_confidence),
                                 self.K, self.d)

        answers, hops = zip(*self._each_seed(seed_predict))
        return np.stack(answers), np.stack(hops)

    def accuracy(self, batch: Batch, linear: bool = False) -> np.ndarray:
        """(S,) each seed's share of questions answered right (no answer class: wrong)."""
        return (self.predict(batch, linear) == self._questions(batch).answer).mean(1)

    def _params(self, s: int) -> tuple:
        """Seed s's parameter arrays, as the compiled loops take them."""
        return (self.emb[s], self.temporal[s], self.halt_w[s], self.halt_b[s], self.H[s], self.log_penalty[s],
                self.answer_in[s], self.answer_b[s], self.answer_out[s], self.relative[s], self.relative_q[s],
                self.question[s], self.gate[s])

    def _questions(self, batch: Batch) -> Questions:
        if id(batch) not in self.questions:
            self.questions[id(batch)] = (batch, Questions(batch, self.model.encoding))
        return self.questions[id(batch)][1]

    def _each_seed(self, work) -> list:
        """work(s) for every seed: on train.threads threads when there are several."""
        seeds = range(self.emb.shape[0])
        if self.threads > 1 and len(seeds) > 1:
            # flush denormals to zero in the workers too: a per-thread setting, which train() sets in its own
            with ThreadPoolExecutor(self.threads, initializer=torch.set_flush_denormal, initargs=(True,)) as pool:
                return list(pool.map(work, seeds))
        return [work(s) for s in seeds]
