"""MemN2N's training loop compiled with Numba: the same forward pass, backward pass and SGD
update as memnet.model._Reader and memnet.train._sgd_step, without their per-operation cost;
and the same forward pass alone, for the trainer's scoring of every seed on train and valid.

A step of the paper's model (d = 20, batch 32, stories of ten sentences) is a few hundred
thousand multiply-adds. PyTorch spends ~5 µs dispatching each of its ~400 operations per
step, NumPy ~2 µs for each of ~100; the arithmetic itself takes less than either. So the
trainer hands whole epochs to the compiled loops below whenever the model's configuration is
one they cover (`unsupported` says which), and keeps the torch model for everything else
(the final evaluation, its hop metrics, inspection). Evaluating every seed every few epochs
in torch multiplies dense bags of words with the tables (20 tasks x 10 seeds: 26 s a time);
the compiled forward pass reads the sparse sentences (under a second). The arrays here are NumPy views
of the torch parameters (they share memory): an update here is the torch model's update, and
evaluation, checkpoints and inspection read the same weights.

Covered: every setting of model.type memn2n (encodings, temporal encoding, adjacent and
layer-wise tying, masking off, hard and soft, the null memory, answers from the state or the
read-out, the stopping rule, attention supervision, linear start), any number of seeds
(trained in parallel on train.threads threads). Not covered (the trainer uses torch): the
transformer readers, a device other than the CPU.

Per question the loops follow the equations of memnet.model with the sentences kept sparse,
as word ids and their position-encoding weights (a_j, c_j), so that l_kj = a_j + e_k c_j and

    x[i, t] = Σ_j l_j · emb[w_ij, table t] + T(age_i)[table t]      m_i (t = k), c_i (t = k+1)

Tables are column blocks of emb: [A^1 = B, C^1 = A^2, ..., C^K = W^T] with adjacent tying,
[B, A, C, W^T] with layer-wise tying.
Slot 0 holds the question (only its table 0, u^1 = B q, is used); with the null memory it is
also the empty memory every hop may attend to: score 0, and nothing to read.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import torch
import torch.nn.functional as F

from memnet.data import Batch


def unsupported(model: torch.nn.Module, device: torch.device) -> str | None:
    """Why this module cannot train `model`, or None when it can."""
    from memnet.model import MemN2N  # here: memnet.model is the reference this module follows

    if not isinstance(model, MemN2N):
        return f"model.type {model.cfg.type}"
    return None if device.type == "cpu" else f"device {device}"


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


class Stepper:
    """Trains a MemN2N in place on one dataset (the trainer's Batch of training questions), and
    answers questions with it as the model does in eval mode."""

    def __init__(self, model: torch.nn.Module, data: Batch, max_grad_norm: float, threads: int = 1):
        cfg = model.cfg
        self.cfg, self.max_grad_norm, self.threads = cfg, max_grad_norm, threads
        self.emb = model.emb.detach().numpy()  # (S, V, T*d) shares memory with the parameter
        S, _, Td = self.emb.shape
        # without temporal encoding, an empty table keeps the compiled loops' types fixed
        self.temporal = model.temporal.detach().numpy() if cfg.temporal else np.zeros((S, 0, Td), np.float32)
        if cfg.stopping:  # the halting unit h = σ(w_h · state + b_h)
            self.halt_w = model.halt_w.detach().numpy()  # (S, d)
            self.halt_b = model.halt_b.detach().numpy().reshape(S, 1)  # (S, 1)
        else:  # unused: zeros keep the types fixed
            self.halt_w, self.halt_b = np.zeros((S, cfg.dim), np.float32), np.zeros((S, 1), np.float32)
        # layer-wise tying's H (u^{k+1} = H u^k + o) and soft masking's penalty, or unused zeros
        self.H = model.H.detach().numpy() if cfg.tying == "layerwise" else np.zeros((S, cfg.dim, cfg.dim), np.float32)
        self.log_penalty = (model.log_penalty.detach().numpy().reshape(S, 1) if cfg.masking == "soft"
                            else np.zeros((S, 1), np.float32))
        self.answer_bag = model.answer_bag.numpy()  # (A, V) the words of each answer class
        self.data = Questions(data, cfg.encoding)
        self.supervision = model.attention_supervision  # weight of the attention supervision loss

    def epoch(self, order: np.ndarray, ages: np.ndarray, lr: float, batch_size: int, linear: bool) -> tuple[float, int]:
        """One pass over the data: order (S, N) each seed's question order, ages (S, N, M)
        each question's memory ages in that order. Returns the summed loss and the steps taken.
        Seeds are independent (their own parameters and order): with threads > 1 they train in
        parallel (the compiled loop runs without Python's lock)."""
        cfg, data = self.cfg, self.data
        order, ages = order.astype(np.int64, copy=False), ages.astype(np.int64, copy=False)

        def seed_epoch(s: int) -> float:
            return _seed_epoch(self.emb[s], self.temporal[s], self.halt_w[s], self.halt_b[s], self.H[s],
                               self.log_penalty[s], self.answer_bag, data.words, data.coef, data.n_words,
                               data.length, data.answer, data.support, data.n_support, order[s], ages[s],
                               np.float32(lr), batch_size, linear, cfg.tying == "layerwise", cfg.masking == "hard",
                               cfg.masking == "soft", cfg.null_memory, cfg.answer_from == "readout", cfg.stopping,
                               np.float32(cfg.halt_cost), np.float32(self.supervision), np.float32(self.max_grad_norm),
                               cfg.hops, cfg.dim)

        return sum(self._each_seed(seed_epoch)), -(-order.shape[1] // batch_size)

    def predict(self, questions: Questions, linear: bool = False) -> np.ndarray:
        """(S, N) each seed's answer class to each question, as the torch model answers in eval
        mode: after the first hop whose halting probability passes model.halt_threshold with
        the stopping rule, else after the last; `linear` as during linear start."""
        cfg = self.cfg

        def seed_predict(s: int) -> np.ndarray:
            return _seed_predict(self.emb[s], self.temporal[s], self.halt_w[s], self.halt_b[s], self.H[s],
                                 self.log_penalty[s], self.answer_bag, questions.words, questions.coef,
                                 questions.n_words, questions.length, questions.ages, linear,
                                 cfg.tying == "layerwise", cfg.masking == "hard", cfg.masking == "soft", cfg.null_memory,
                                 cfg.answer_from == "readout", cfg.stopping, np.float32(cfg.halt_threshold),
                                 cfg.hops, cfg.dim)

        return np.stack(self._each_seed(seed_predict))

    def accuracy(self, questions: Questions, linear: bool = False) -> np.ndarray:
        """(S,) each seed's share of questions answered right (no answer class: wrong)."""
        return (self.predict(questions, linear) == questions.answer).mean(1)

    def _each_seed(self, work) -> list:
        """work(s) for every seed: on train.threads threads when there are several (the compiled
        loops run without Python's lock)."""
        seeds = range(self.emb.shape[0])
        if self.threads > 1 and len(seeds) > 1:
            # flush denormals to zero in the workers too: a per-thread setting, which train() sets in its own
            with ThreadPoolExecutor(self.threads, initializer=torch.set_flush_denormal, initargs=(True,)) as pool:
                return list(pool.map(work, seeds))
        return [work(s) for s in seeds]

    def step(self, idx: np.ndarray, ages: np.ndarray, lr: float, linear: bool) -> float:
        """One SGD step on the questions idx (S, B) with memory ages (S, B, M); returns the
        loss summed over questions and seeds."""
        return self.epoch(idx, ages, lr, idx.shape[1], linear)[0]


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _seed_epoch(emb, temporal, halt_w, halt_b, H, log_penalty, answer_bag, words, coef, n_words, length, answer,
                support, n_support, order, ages, lr, batch_size, linear, layerwise, masking, soft, null, readout,
                stopping, halt_cost, supervision, max_norm, K, d):
    """One seed's epoch: its parameters emb (V, T*d), temporal (memory, T*d), halt_w (d,),
    halt_b (1,), H (d, d) and log_penalty (1,) are updated in place."""
    V, Td = emb.shape
    n_answers, n_ages, M1 = answer_bag.shape[0], temporal.shape[0], words.shape[1]
    e = ((np.arange(Td) % d + 1) / d).astype(np.float32)  # e_k = k/d, for each table's column k
    g_emb, g_temporal = np.empty_like(emb), np.zeros_like(temporal)
    W = np.empty((n_answers, d), np.float32)  # W = answer words' rows of C^K
    g_W = np.empty((n_answers, d), np.float32)
    x = np.empty((M1, Td), np.float32)  # x[i, t*d:(t+1)*d]: table t applied to slot i
    g_x = np.empty((M1, Td), np.float32)
    tables = x.reshape((M1, Td // d, d))  # the same, as tables[i, t, k]: the hops' inner loops over k
    g_tables = g_x.reshape((M1, Td // d, d))
    p = np.empty((K, M1), np.float32)  # attention of each hop (slot 0: nothing, the null memory reads nothing)
    attends = np.empty((K, M1), np.bool_)  # slots each hop could attend to
    u = np.empty((K + 1, d), np.float32)  # u^1 .. u^{K+1}
    reads = np.empty((K, d), np.float32)  # o^1 .. o^K
    probs = np.empty((K, n_answers), np.float32)  # â_k
    ce = np.empty(K, np.float32)  # CE(â_k)
    h, reach, pi = np.empty(K, np.float32), np.empty(K, np.float32), np.empty(K, np.float32)  # halting
    g_state = np.empty((K, d), np.float32)
    g_halt_w, g_halt_b = np.empty_like(halt_w), np.empty_like(halt_b)
    g_u, g_o = np.empty(d, np.float32), np.empty(d, np.float32)
    g_p = np.empty(M1, np.float32)
    scores = np.empty((K, M1), np.float32)  # u^k · m_i, for attention supervision
    g_scores = np.empty((K, M1), np.float32)  # its gradient through the supervision loss
    cost = np.empty(K, np.float32)  # ∂loss/∂π_k
    visited = np.empty((K, M1), np.bool_)  # soft masking: memories earlier hops chose
    g_H, g_log_penalty = np.empty_like(H), np.empty_like(log_penalty)
    g_next = np.empty(d, np.float32)
    penalty = np.exp(log_penalty[0])
    n_supervised = min(K, support.shape[1])
    total = 0.0
    N = order.shape[0]
    for start in range(0, N, batch_size):
        g_emb[:] = 0.0
        aged = 0  # rows of g_temporal this step touches: T(age) for the ages < aged
        g_halt_w[:] = 0.0
        g_halt_b[:] = 0.0
        g_H[:] = 0.0
        g_log_penalty[:] = 0.0
        g_W[:] = 0.0
        _answer_rows(W, emb, answer_bag)
        for b in range(start, min(start + batch_size, N)):
            q = order[b]
            L = length[q]
            _embed(x, emb, temporal, words[q], coef[q], n_words[q], ages[b], L, d, e)
            _hops(tables, u, reads, p, attends, visited, scores, H, penalty, L, linear, layerwise, masking, soft, null)
            # the hops the answer may come from: all with the stopping rule, else the last
            states = reads if readout else u[1:]  # (K, d) o^k or u^{k+1}: what â_k reads
            first = 0 if stopping else K - 1
            target = answer[q]
            ce[:] = 0.0
            for r in range(first, K):  # â_r = softmax(W state_r) and its cross-entropy
                top = np.float32(-np.inf)
                state = states[r]
                for a in range(n_answers):
                    logit = np.float32(0.0)
                    W_a = W[a]
                    for k in range(d):
                        logit += W_a[k] * state[k]
                    probs[r, a] = logit
                    top = max(top, logit)
                target_logit = probs[r, target] - top if target >= 0 else np.float32(0.0)
                norm = np.float32(0.0)
                for a in range(n_answers):
                    probs[r, a] = np.exp(probs[r, a] - top)
                    norm += probs[r, a]
                for a in range(n_answers):
                    probs[r, a] /= norm
                if target >= 0:  # else no answer among the classes: no cross-entropy
                    ce[r] = np.log(norm) - target_logit
            # π_k = h_k Π_{j<k} (1 - h_j), h_k = σ(w_h · state_k + b_h), h_K = 1; without stopping π = (0, .., 1)
            pi[:] = 0.0
            pi[K - 1] = 1.0
            if stopping:
                go_on = np.float32(1.0)
                for r in range(K):
                    z = halt_b[0]
                    for k in range(d):
                        z += halt_w[k] * states[r, k]
                    h[r] = np.float32(1.0) if r == K - 1 else np.float32(1.0) / (np.float32(1.0) + np.exp(-z))
                    reach[r] = go_on  # Π_{j<r} (1 - h_j)
                    pi[r] = h[r] * go_on
                    go_on *= np.float32(1.0) - h[r]
            for r in range(first, K):  # loss: Σ_k π_k (CE_k + halt_cost (k - 1)), or CE_K
                cost[r] = ce[r] + (halt_cost * r if stopping else np.float32(0.0))
                total += pi[r] * cost[r]
            g_scores[:] = 0.0
            if supervision > 0:  # hop k's scores pulled to the k-th supporting fact, the halting to their number
                for hop in range(n_supervised):
                    fact = support[q, hop] + 1  # its slot; 0: none, or out of memory
                    if fact > 0 and attends[hop, fact]:
                        top = np.float32(-np.inf)
                        for i in range(1, L + 1):
                            if attends[hop, i]:
                                top = max(top, scores[hop, i])
                        norm = np.float32(0.0)
                        for i in range(1, L + 1):
                            if attends[hop, i]:
                                g_scores[hop, i] = np.exp(scores[hop, i] - top)
                                norm += g_scores[hop, i]
                        total += supervision * (np.log(norm) - (scores[hop, fact] - top))
                        for i in range(1, L + 1):
                            g_scores[hop, i] *= supervision / norm
                        g_scores[hop, fact] -= supervision
                if stopping:
                    want = min(max(n_support[q], 1), K) - 1
                    total -= supervision * np.log(max(pi[want], np.float32(1e-8)))
                    if pi[want] > 1e-8:
                        cost[want] -= supervision / pi[want]

            # gradients of the states: through â_k, and through the halting unit
            g_state[:] = 0.0
            if target >= 0:
                for r in range(first, K):
                    state, g_state_r = states[r], g_state[r]
                    for a in range(n_answers):
                        g_logit = pi[r] * (probs[r, a] - np.float32(1.0 if a == target else 0.0))
                        W_a, g_W_a = W[a], g_W[a]
                        for k in range(d):
                            g_W_a[k] += g_logit * state[k]
                        for k in range(d):
                            g_state_r[k] += g_logit * W_a[k]
            if stopping:  # ∂h_j = reach_j (cost_j - Σ_{k>j} cost_k h_k Π_{j<i<k} (1 - h_i)), cost_k = ∂loss/∂π_k
                later = np.float32(0.0)
                for r in range(K - 2, -1, -1):
                    later = cost[r + 1] * h[r + 1] + (np.float32(1.0) - h[r + 1]) * later
                    g_z = h[r] * (np.float32(1.0) - h[r]) * reach[r] * (cost[r] - later)
                    g_halt_b[0] += g_z
                    for k in range(d):
                        g_halt_w[k] += g_z * states[r, k]
                        g_state[r, k] += g_z * halt_w[k]

            # backward through the hops
            g_x[:L + 1] = 0.0
            g_u[:] = 0.0
            if not readout:
                g_u[:] = g_state[K - 1]  # ∂u^{K+1}
            for hop in range(K - 1, -1, -1):
                if readout:
                    for k in range(d):  # ∂o^k: through u^{k+1} = u^k + o^k, and as â_k's state
                        g_o[k] = g_u[k] + g_state[hop, k]
                else:
                    if hop < K - 1:
                        for k in range(d):  # ∂u^{k+1} as â_k's state
                            g_u[k] += g_state[hop, k]
                    g_o[:] = g_u
                a_table, c_table = (1, 2) if layerwise else (hop, hop + 1)
                weighted = np.float32(0.0)  # Σ_j p_j ∂p_j
                for i in range(1, L + 1):
                    if attends[hop, i]:
                        p_i = p[hop, i]
                        g_p_i = np.float32(0.0)
                        for k in range(d):
                            g_p_i += tables[i, c_table, k] * g_o[k]  # ∂p_i = c_i · ∂o
                            g_tables[i, c_table, k] += p_i * g_o[k]  # ∂c_i = p_i ∂o
                        g_p[i] = g_p_i
                        weighted += p_i * g_p_i
                u_k = u[hop]
                if layerwise:  # u^{k+1} = H u^k + o: ∂H += ∂u^{k+1} u^k, ∂u^k = H^T ∂u^{k+1}
                    g_next[:] = g_u
                    g_u[:] = 0.0
                    for k in range(d):
                        H_k, g_H_k, g_next_k = H[k], g_H[k], g_next[k]
                        for j in range(d):
                            g_H_k[j] += g_next_k * u_k[j]
                        for j in range(d):
                            g_u[j] += H_k[j] * g_next_k
                for i in range(1, L + 1):
                    if attends[hop, i]:
                        g_score = (g_p[i] if linear else p[hop, i] * (g_p[i] - weighted)) + g_scores[hop, i]
                        if visited[hop, i]:  # score_i - e^{log_penalty}
                            g_log_penalty[0] -= g_score * penalty
                        for k in range(d):
                            g_tables[i, a_table, k] += g_score * u_k[k]  # ∂m_i = ∂score_i u^k
                            g_u[k] += g_score * tables[i, a_table, k]  # ∂u^k gets Σ_i ∂score_i m_i
            for k in range(d):  # u^1 = B q
                g_x[0, k] += g_u[k]
            # the tables' gradient, back through the sparse sentences
            for i in range(L + 1):
                columns = d if i == 0 else Td
                g_x_i = g_x[i]
                for j in range(n_words[q, i]):
                    a_j, c_j = coef[q, i, j, 0], coef[q, i, j, 1]
                    g_row = g_emb[words[q, i, j]]
                    for tk in range(columns):
                        g_row[tk] += (a_j + e[tk] * c_j) * g_x_i[tk]
                if i > 0 and n_ages > 0:
                    age = min(ages[b, i - 1], n_ages - 1)
                    aged = max(aged, age + 1)
                    g_row = g_temporal[age]
                    for tk in range(Td):
                        g_row[tk] += g_x_i[tk]
        for a in range(n_answers):  # W = answer_bag C^K
            for v in range(V):
                if answer_bag[a, v] != 0.0:
                    for k in range(d):
                        g_emb[v, Td - d + k] += answer_bag[a, v] * g_W[a, k]
        # SGD, with this seed's gradient norm clipped at max_norm
        norm = np.sqrt(_squares(g_emb.ravel()) + _squares(g_temporal[:aged].ravel()) + _squares(g_halt_w)
                       + _squares(g_halt_b) + _squares(g_H.ravel()) + _squares(g_log_penalty))
        step = np.float32(lr * min(1.0, max_norm / (norm + 1e-6)))
        _descend(emb.ravel(), g_emb.ravel(), step)
        _descend(temporal[:aged].ravel(), g_temporal[:aged].ravel(), step)
        g_temporal[:aged] = 0.0
        _descend(halt_w, g_halt_w, step)
        _descend(halt_b, g_halt_b, step)
        _descend(H.ravel(), g_H.ravel(), step)
        _descend(log_penalty, g_log_penalty, step)
        penalty = np.exp(log_penalty[0])
    return total


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _squares(a):
    """Σ a², accumulated in float64 (as torch's gradient-norm clipping)."""
    total = 0.0
    for v in a:
        total += np.float64(v) * np.float64(v)
    return total


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _descend(a, g, step):
    """a -= step · g, in place."""
    for i in range(a.shape[0]):
        a[i] -= step * g[i]


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy", inline="always")
def _embed(x, emb, temporal, words, coef, n_words, ages, L, d, e):
    """x[i] for one question's slots 0..L: every table applied to memory i (at its age), and
    table 0 (B) to the question in slot 0. words, coef, n_words: the question's rows; ages (M,)."""
    Td, n_ages = emb.shape[1], temporal.shape[0]
    for i in range(L + 1):
        columns = d if i == 0 else Td
        x_i = x[i]
        x_i[:] = 0.0
        for j in range(n_words[i]):
            a_j, c_j = coef[i, j, 0], coef[i, j, 1]
            row = emb[words[i, j]]
            for tk in range(columns):
                x_i[tk] += (a_j + e[tk] * c_j) * row[tk]
        if i > 0 and n_ages > 0:
            row = temporal[min(ages[i - 1], n_ages - 1)]
            for tk in range(Td):
                x_i[tk] += row[tk]


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy", inline="always")
def _hops(tables, u, reads, p, attends, visited, scores, H, penalty, L, linear, layerwise, masking, soft, null):
    """The K hops over memories 1..L: from u[0] = B q (tables[0, 0]), each hop's attention p[k]
    (scores[k] before the softmax), read-out reads[k] = o^k and state u[k + 1]; attends[k] the
    memories hop k could attend to, visited[k] those soft masking penalises."""
    K, d = p.shape[0], u.shape[1]
    u[0] = tables[0, 0]  # u^1 = B q
    attends[:, 0] = False
    attends[0, 1:L + 1] = True
    visited[0] = False
    for hop in range(K):
        a_table, c_table = (1, 2) if layerwise else (hop, hop + 1)  # which tables are A and C
        if hop > 0:
            attends[hop] = attends[hop - 1]
            visited[hop] = visited[hop - 1]
            if masking or soft:  # the memory the last hop chose (its argmax): blocked, or penalised
                best, choice = 0.0, 0
                for i in range(1, L + 1):
                    if p[hop - 1, i] > best:
                        best, choice = p[hop - 1, i], i
                if masking:
                    attends[hop, choice] = False
                elif choice > 0:
                    visited[hop, choice] = True
        # p_i = softmax_i(u^k · m_i) over the memories it may attend to, and the null memory (score 0)
        p[hop] = 0.0
        top = np.float32(0.0 if null else -np.inf)
        u_k = u[hop]
        for i in range(1, L + 1):
            if attends[hop, i]:
                score = np.float32(0.0)
                for k in range(d):
                    score += u_k[k] * tables[i, a_table, k]
                if visited[hop, i]:  # soft masking lowers a chosen memory's score
                    score -= penalty
                p[hop, i] = score
                scores[hop, i] = score
                top = max(top, score)
        if not linear:  # linear start: p_i = u^k · m_i
            norm = np.exp(-top) if null else np.float32(0.0)
            for i in range(1, L + 1):
                if attends[hop, i]:
                    p[hop, i] = np.exp(p[hop, i] - top)
                    norm += p[hop, i]
            for i in range(1, L + 1):
                if attends[hop, i]:
                    p[hop, i] /= norm
        o = reads[hop]  # o = Σ_i p_i c_i
        o[:] = 0.0
        for i in range(1, L + 1):
            if attends[hop, i]:
                p_i = p[hop, i]
                for k in range(d):
                    o[k] += p_i * tables[i, c_table, k]
        u_next = u[hop + 1]  # u^{k+1} = u^k + o, or H u^k + o with layer-wise tying
        for k in range(d):
            u_next[k] = o[k]
            if layerwise:
                H_k = H[k]
                for j in range(d):
                    u_next[k] += H_k[j] * u_k[j]
            else:
                u_next[k] += u_k[k]


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy", inline="always")
def _answer_rows(W, emb, answer_bag):
    """W (A, d) = answer_bag C^K: each answer class's row, the sum of its words' rows of the last table."""
    Td, d = emb.shape[1], W.shape[1]
    W[:] = 0.0
    for a in range(answer_bag.shape[0]):
        for v in range(answer_bag.shape[1]):
            if answer_bag[a, v] != 0.0:
                for k in range(d):
                    W[a, k] += answer_bag[a, v] * emb[v, Td - d + k]


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _seed_predict(emb, temporal, halt_w, halt_b, H, log_penalty, answer_bag, words, coef, n_words, length, ages,
                  linear, layerwise, masking, soft, null, readout, stopping, halt_threshold, K, d):
    """One seed's answer class to each question (the forward pass of _seed_epoch, and the
    stopping rule at inference)."""
    N, M1 = words.shape[0], words.shape[1]
    Td = emb.shape[1]
    e = ((np.arange(Td) % d + 1) / d).astype(np.float32)  # e_k = k/d, for each table's column k
    W = np.empty((answer_bag.shape[0], d), np.float32)
    _answer_rows(W, emb, answer_bag)
    x = np.empty((M1, Td), np.float32)
    tables = x.reshape((M1, Td // d, d))
    p, scores = np.empty((K, M1), np.float32), np.empty((K, M1), np.float32)
    attends, visited = np.empty((K, M1), np.bool_), np.empty((K, M1), np.bool_)
    u, reads = np.empty((K + 1, d), np.float32), np.empty((K, d), np.float32)
    penalty = np.exp(log_penalty[0])
    answers = np.empty(N, np.int64)
    for q in range(N):
        L = length[q]
        _embed(x, emb, temporal, words[q], coef[q], n_words[q], ages[q], L, d, e)
        _hops(tables, u, reads, p, attends, visited, scores, H, penalty, L, linear, layerwise, masking, soft, null)
        states = reads if readout else u[1:]  # (K, d) what â_k reads
        r = K - 1
        if stopping:  # the first hop whose h_k = σ(w_h · state_k + b_h) passes the threshold
            for hop in range(K - 1):
                z = halt_b[0]
                for k in range(d):
                    z += halt_w[k] * states[hop, k]
                if np.float32(1.0) / (np.float32(1.0) + np.exp(-z)) > halt_threshold:
                    r = hop
                    break
        best, answers[q] = np.float32(-np.inf), 0
        for a in range(W.shape[0]):  # argmax_a W_a · state_r (the first of equals, as torch's argmax)
            logit = np.float32(0.0)
            for k in range(d):
                logit += W[a, k] * states[r, k]
            if logit > best:
                best, answers[q] = logit, a
    return answers
