"""MemN2N's training step and forward pass compiled with Numba: the same numbers as the
reference model (memnet/models/memn2n.py) and the trainer's SGD step, without their
per-operation cost.

A step of the paper's model (d = 20, batch 32, stories of ten sentences) is a few hundred
thousand multiply-adds. PyTorch spends ~5 µs dispatching each of its ~400 operations per
step, NumPy ~2 µs for each of ~100; the arithmetic itself takes less than either. So whole
epochs run here, per question, with the sentences kept sparse (word ids and their
position-encoding weights a_j, c_j, so that l_kj = a_j + e_k c_j):

    x[i, t] = Σ_j l_j · emb[w_ij, table t] + T(age_i)[table t]      m_i (t = A^k), c_i (t = C^k)

emb (V, n_tables * d) holds the reference model's tables side by side, [A^1 = B, C^1 = A^2,
..., C^K = W^T] with adjacent tying, [B, A, C, W^T] with layer-wise tying. Slot 0 holds the
question (only its table 0, u^1 = B q, is used; with model.question_table own, B is an array
of its own, question_table (V, d), with offset A^1 + question_table, the question's gradient
into question_table alone; else a (1, 1) of zeros that no loop reads); with the null
memory it is also the empty memory every hop may attend to: score 0, and nothing to read. The
answer module (model.answer_hidden) is dense: U ((K+1) d, H), or (2d, H) with answer_reads
current, (3d, H) with product or sum, b (H,), V (H, A), as in the reference model; with sum, the gates' bias b_k
is sum_bias (K,) (zeros that no loop reads without it), and what it sums, relu(C^k x_i) without
T(i), is computed from the sentence's words apart from x. The pointer in time
(model.relative_time D) is w (K-1, 2D+1); without it, (K-1, 1) of zeros that no loop reads; with
model.relative_query, r (K-1, 2D+1, d), hop k's weights being w^k + r^k u^k (else (K-1, 1, 1)).
With model.attention stick, each hop attends by stick-breaking from slot 1 (the most recent) back;
with mixed, by σ(g_k) of that and 1 - σ(g_k) of the softmax, g = stick_gate (K,) (zeros that no
loop reads otherwise).

Restarts train side by side: every array has a leading seed dimension S, and each seed's
epoch runs on its own thread when train.threads > 1 (the loops run without Python's lock).

COVERS declares, as data, every configuration this kernel computes exactly as the reference
does; the trainer uses it only for a run whose every setting is covered (memnet.kernels).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import torch
import torch.nn.functional as F

from memnet.data import Batch
from memnet.kernels import ANY

NAME = "numba"
COVERS = {
    "model.type": ("memn2n",),
    "model.dim": ANY,
    "model.hops": ANY,
    "model.encoding": ("bow", "pe"),
    "model.temporal": (True, False),
    "model.tying": ("adjacent", "layerwise"),
    "model.masking": ("off", "hard", "soft", "second"),
    "model.second_alternate": ANY,  # tests/test_kernels.py: a switched restart beside one not switched
    "model.answer_from": ("state", "readout", "question"),
    "model.null_memory": (True, False),
    "model.stopping": (True, False),
    "model.halt_cost": ANY,
    "model.halt_threshold": ANY,
    "model.halt_confidence": ANY,
    "model.halt_init": ANY,
    "model.halt_training": ("expected", "right", "right_last", "right_own"),
    "model.answer_rows": ("last", "own"),
    "model.question_table": ("tied", "own", "offset"),
    "model.attention": ("softmax", "stick", "mixed"),
    "model.early_answers": ANY,
    "model.early_answers_hop1": ANY,
    "model.mask_init": ANY,
    "model.mask_linear_start": (True, False),
    "model.stick_init": ANY,
    "model.relative_time": ANY,
    "model.relative_query": (True, False),
    "model.answer_hidden": ANY,
    "model.answer_reads": ("all", "current", "product", "sum"),
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


class Training:
    """Trains S reference models' weights side by side (a copy, as arrays with a leading seed
    dimension), on the training Batch `data`; scores them on any Batch. `state_dict(s)` gives
    seed s back as the reference model's state_dict."""

    name = NAME

    def __init__(self, models: list[torch.nn.Module], data: Batch, *, max_grad_norm: float, threads: int = 1):
        first = models[0]
        self.model, self.max_grad_norm, self.threads = first, max_grad_norm, threads
        self.early = [m.early_answers for m in models]  # each restart's (model.early_alternate: not all alike)
        self.K, self.d, self.n_tables = first.hops, first.dim, first.n_tables
        V, S, Td = first.tables.shape[1], len(models), first.n_tables * first.dim
        zeros = np.zeros
        self.emb = zeros((S, V, Td), np.float32)  # the tables side by side
        self.temporal = zeros((S, first.memory_size if first.temporal is not None else 0, Td), np.float32)
        self.halt_w, self.halt_b = zeros((S, self.d), np.float32), zeros((S, 1), np.float32)
        self.H, self.log_penalty = zeros((S, self.d, self.d), np.float32), zeros((S, 1), np.float32)
        hidden, n_answers = first.answer_hidden, first.answer_bag.shape[0]  # the answer module: U, b, V (none: 0 units)
        # u^1 and every read-out, u^1 and o^k, or those and u^1 ⊙ o^k (product) or s^k (sum)
        inputs = {"all": self.K + 1, "current": 2, "product": 3, "sum": 3}[first.answer_reads]
        self.answer_in = zeros((S, inputs * self.d, hidden), np.float32)
        self.answer_in_b, self.answer_out = zeros((S, hidden), np.float32), zeros((S, hidden, n_answers), np.float32)
        self.sum_bias = zeros((S, self.K), np.float32)  # answer_reads sum: each hop's gate bias b_k
        self.stick_gate = zeros((S, self.K), np.float32)  # attention mixed: each hop's g_k (else zeros no loop reads)
        # the pointer in time's w^k, hops 2..K (read only with model.relative_time)
        self.relative = zeros((S, max(self.K - 1, 0), 2 * first.relative_time + 1), np.float32)
        # its r^k with model.relative_query (w^k + r^k u^k); without it, (K-1, 1, 1) of zeros that no loop reads
        query = (2 * first.relative_time + 1, self.d) if first.relative_query else (1, 1)
        self.relative_q = zeros((S, max(self.K - 1, 0), *query), np.float32)
        # question_table own: the question's table B apart from A^1; else (1, 1) of zeros that no loop reads
        self.question_table = zeros((S, V, self.d) if first.question_table is not None else (S, 1, 1), np.float32)
        # masking second per seed where model.second_alternate switches it (the models' `second`)
        self.second = zeros((S,), np.float32)
        self.halt_training = [m.halt_training for m in models]  # each restart's (model.second_alternate: not all alike)
        for s, model in enumerate(models):
            self.load_state_dict(s, model.state_dict())
        self.answer_bag = first.answer_bag.numpy()  # (A, V) the words of each answer class
        self.data = Questions(data, first.encoding)
        # the Batches scored again and again, by id, each kept alive beside its Questions so
        # that its id cannot be reused by another Batch
        self.questions: dict[int, tuple[Batch, Questions]] = {id(data): (data, self.data)}

    def flags(self, s: int) -> tuple:
        """Seed s's switches, as the compiled loops take them (after linear start's). The last:
        soft masking's penalty during linear start (model.mask_linear_start)."""
        m, halt = self.model, self.halt_training[s]
        # masking: 0 off or soft, 1 hard, 2 second (soft, and hop 2 blocked from hop 1's choice)
        masking = 2 if m.masking == "second" or self.second[s] else {"hard": 1}.get(m.masking, 0)
        return (m.tying == "layerwise", masking, m.masking in ("soft", "second"), m.null_memory,
                m.answer_from == "readout", m.answer_from == "question", m.stopping,
                m.answer_reads == "product", m.stopping and halt in ("right", "right_last", "right_own"), m.summed,
                m.stopping and halt == "right_last", m.answer_rows == "own",
                m.question_table is not None, m.question_offset, m.stick, m.mixed, m.own_hops, m.mask_linear_start)

    def load_state_dict(self, s: int, state: dict[str, torch.Tensor]) -> None:
        """Seed s's arrays from a reference model's state_dict."""
        n, d = self.n_tables, self.d
        self.emb[s] = state["tables"].transpose(0, 1).reshape(-1, n * d).numpy()
        if "temporal" in state:
            self.temporal[s] = state["temporal"].transpose(0, 1).reshape(-1, n * d).numpy()
        for name, array in (("H", self.H), ("halt_w", self.halt_w), ("halt_b", self.halt_b),
                            ("log_penalty", self.log_penalty), ("answer_in", self.answer_in),
                            ("answer_in_b", self.answer_in_b), ("answer_out", self.answer_out),
                            ("relative", self.relative), ("relative_q", self.relative_q), ("sum_bias", self.sum_bias),
                            ("stick_gate", self.stick_gate), ("question_table", self.question_table),
                            ("second", self.second)):
            if name in state:
                array[s] = state[name].numpy().reshape(array[s].shape)

    def state_dict(self, s: int) -> dict[str, torch.Tensor]:
        """Seed s as the reference model's state_dict (copies)."""
        n, d = self.n_tables, self.d
        out = {}
        for name, value in self.model.state_dict().items():
            if name == "tables":
                array = self.emb[s].reshape(-1, n, d).transpose(1, 0, 2)
            elif name == "temporal":
                array = self.temporal[s].reshape(-1, n, d).transpose(1, 0, 2)
            else:
                array = getattr(self, name)[s].reshape(value.shape)
            out[name] = torch.from_numpy(np.ascontiguousarray(array)).clone()
        return out

    def epoch(self, order: np.ndarray, ages: np.ndarray, lr: float, batch_size: int, linear: bool) -> np.ndarray:
        """One pass over the data: order (S, N) each seed's question order, ages (S, N, M) each
        question's memory ages in that order. Returns each seed's summed loss (S,)."""
        m, data = self.model, self.data
        order, ages = order.astype(np.int64, copy=False), ages.astype(np.int64, copy=False)
        batches = (data.words, data.coef, data.n_words, data.length, data.answer, data.support, data.n_support)

        def seed_epoch(s: int) -> float:
            hyper = (np.float32(lr), np.float32(m.halt_cost), np.float32(m.attention_supervision),
                     np.float32(self.max_grad_norm), np.float32(self.early[s]), np.float32(m.halt_threshold),
                     np.float32(m.early_answers_hop1))
            return _seed_epoch(self._params(s), self.answer_bag, batches, order[s], ages[s], batch_size, (linear, *self.flags(s)),
                               hyper, self.K, self.d)

        return np.array(self._each_seed(seed_epoch))

    def predict(self, batch: Batch, linear: bool = False) -> np.ndarray:
        """(S, N) each seed's answer class to each question, as the reference model answers in
        eval mode (the stopping rule at halt_threshold and halt_confidence); `linear` as during linear start."""
        return self.answers(batch, linear)[0]

    def answers(self, batch: Batch, linear: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """predict's (S, N) answer classes, and (S, N) the hops each seed took on each question
        (the stopping rule's; else model.hops)."""
        q = self._questions(batch)
        threshold, confidence = np.float32(self.model.halt_threshold), np.float32(self.model.halt_confidence)

        def seed_predict(s: int) -> tuple[np.ndarray, np.ndarray]:
            return _seed_predict(self._params(s), self.answer_bag, q.words, q.coef, q.n_words, q.length, q.ages,
                                 (linear, *self.flags(s)), threshold, confidence, self.K, self.d)

        answers, hops = zip(*self._each_seed(seed_predict))
        return np.stack(answers), np.stack(hops)

    def accuracy(self, batch: Batch, linear: bool = False) -> np.ndarray:
        """(S,) each seed's share of questions answered right (no answer class: wrong)."""
        return (self.predict(batch, linear) == self._questions(batch).answer).mean(1)

    def _params(self, s: int) -> tuple:
        """Seed s's parameter arrays, as the compiled loops take them."""
        return (self.emb[s], self.temporal[s], self.halt_w[s], self.halt_b[s], self.H[s], self.log_penalty[s],
                self.answer_in[s], self.answer_in_b[s], self.answer_out[s], self.relative[s], self.relative_q[s],
                self.sum_bias[s], self.question_table[s], self.stick_gate[s])

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


JIT = dict(cache=True, nogil=True, fastmath=True, error_model="numpy")


@numba.njit(**JIT)
def _seed_epoch(params, answer_bag, data, order, ages, batch_size, flags, hyper, K, d):
    """One seed's epoch of SGD steps; its parameters (emb, temporal, halt_w, halt_b, H,
    log_penalty, the answer module's U, b, V, ..., and the question's own table) are updated in
    place. Returns the summed loss. Per question: the forward pass (_embed, _hops), the answers
    and the loss, then the backward pass into the gradients."""
    emb, temporal, halt_w, halt_b, H, log_penalty, U, U_b, V, rel, relq, sum_b, own_b, mix = params
    words, coef, n_words, length, answer, support, n_support = data
    linear, layerwise, masking, soft, null, readout, asked, stopping, product, right, summed, last, own, own_q, offset, \
        stick, mixed, own_hops, linear_penalty = flags
    lr, halt_cost, supervision, max_norm, early, threshold, early_hop1 = hyper
    M1, Td, n_answers = words.shape[1], emb.shape[1], answer_bag.shape[0]
    e = ((np.arange(Td) % d + 1) / d).astype(np.float32)  # e_k = k/d, for each table's column k
    W = np.empty((K, n_answers, d), np.float32)  # each hop's W: the answer words' rows of C^K (own: of C^k)
    grads = (np.empty_like(emb), np.zeros_like(temporal), np.empty_like(halt_w), np.empty_like(halt_b),
             np.empty_like(H), np.empty_like(log_penalty), np.empty_like(U), np.empty_like(U_b), np.empty_like(V),
             np.empty((K, n_answers, d), np.float32), np.empty_like(rel), np.empty_like(relq), np.empty_like(sum_b),
             np.empty_like(own_b), np.empty_like(mix))
    g_emb, g_temporal, g_halt_w, g_halt_b, g_H, g_log_penalty, g_U, g_U_b, g_V, g_W, g_rel, g_relq, g_sum_b, g_own_b, \
        g_mix = grads
    B, g_B = (own_b, g_own_b) if own_q else (emb, g_emb)  # the question's table: its first d columns
    x, g_x, tables, g_tables, p, scores, g_scores, attends, visited, u, reads, g_state, probs, g_p = \
        _workspace(M1, Td, K, d, n_answers)
    parts = np.zeros((2, K, M1) if mixed else (2, 1, 1), np.float32)  # attention mixed: each hop's stick-breaking, softmax
    ce, h, reach = np.empty(K, np.float32), np.empty(K, np.float32), np.empty(K, np.float32)  # CE(â_k), h_k, Π_{j<k}(1 - h_j)
    pi, cost = np.empty(K, np.float32), np.empty(K, np.float32)  # π_k, ∂loss/∂π_k
    apart = np.zeros(K, np.float32)  # right_last, right_own: the weights of the answers whose inputs' gradient is stopped
    # right_own: those answers' ∂o^k, and hop k's ∂score and ∂w^k from them (into its own hop alone)
    g_own = np.zeros((K, d) if own_hops else (1, 1), np.float32)
    g_own_p, g_own_wq = np.zeros(M1, np.float32), np.zeros((K, rel.shape[1]), np.float32)
    g_dropped = np.zeros(M1, np.float32)  # their ∂p^{k-1}, which no earlier hop receives
    g_u, g_o, g_next = np.empty(d, np.float32), np.empty(d, np.float32), np.empty(d, np.float32)  # ∂u, ∂o, ∂u^{k+1}
    hidden = V.shape[0]  # the answer module's units (0: none)
    pre, extra = np.zeros((K, hidden), np.float32), np.zeros((K, n_answers), np.float32)  # U x_k + b; its logits
    g_reads, g_question, g_pre = np.zeros((K, d), np.float32), np.zeros(d, np.float32), np.empty(hidden, np.float32)
    # the module's third input (u^1 ⊙ o^k with product, s^k with sum), its gradient, and sum's gates σ(score + b_k)
    third, g_third, gates = np.zeros((K, d), np.float32), np.zeros((K, d), np.float32), np.zeros((K, M1), np.float32)
    summands = np.zeros((K if summed else 0, M1, d), np.float32)  # sum's relu(C^k x_i), each sentence's words alone
    g_earlier = np.zeros(M1, np.float32)  # ∂loss/∂p^{k-1} through hop k's pointer in time
    wq, g_wq = np.zeros((K, rel.shape[1]), np.float32), np.zeros((K, rel.shape[1]), np.float32)  # hop k's w^k (+ r^k u^k)
    states = reads if readout else np.empty((K, d), np.float32) if asked else u[1:]  # (K, d) what â_k reads:
    # o^k, u^1 + o^k or u^{k+1}
    first = 0 if stopping else K - 1  # the hops the answer may come from: all with the stopping rule, else the last
    total = 0.0
    N = order.shape[0]
    for start in range(0, N, batch_size):
        g_emb[:] = 0.0
        g_halt_w[:] = 0.0
        g_halt_b[:] = 0.0
        g_H[:] = 0.0
        g_log_penalty[:] = 0.0
        g_W[:] = 0.0
        g_U[:] = 0.0
        g_U_b[:] = 0.0
        g_V[:] = 0.0
        g_rel[:] = 0.0
        g_relq[:] = 0.0
        g_sum_b[:] = 0.0
        g_own_b[:] = 0.0
        g_mix[:] = 0.0
        _answer_rows(W, emb, answer_bag, own)
        penalty = _penalty(log_penalty, linear, linear_penalty)
        aged = 0  # rows of g_temporal this step touches: T(age) for the ages < aged
        for b in range(start, min(start + batch_size, N)):
            q = order[b]
            L, target = length[q], answer[q]
            _embed(x, emb, B, temporal, words[q], coef[q], n_words[q], ages[b], L, d, e, offset)
            _hops(tables, u, reads, p, attends, visited, scores, H, penalty, rel, relq, wq, ages[b], L, linear, layerwise,
                  masking, soft, null, (stick, mixed, mix, parts))
            if asked:
                _question_states(states, u, reads)
            if hidden:
                if product or summed:
                    _third_input(third, gates, summands, emb, words[q], coef[q], n_words[q], e, u[0], reads, scores,
                                 attends, sum_b, L, layerwise, product, summed)
                _module(U, U_b, V, u[0], reads, third, pre, extra, first, product or summed)
            _answer_probs(W, states, extra, probs, ce, target, first)
            _halting(halt_w, halt_b, states, h, reach, pi, stopping)
            if right:  # the answer the rule gives at 1, every other at early_answers; h_k learns whether â_k is right
                given = _stop_hop(h, threshold, 0)
                pi[:] = early
                pi[0] = early_hop1  # model.early_answers_hop1 (early_answers where that is -1)
                pi[given] = 1.0
                if last:  # right_last: the last hop's at 1 too; the others' reach the answer layer alone
                    pi[K - 1] = 1.0
                if last or own_hops:  # right_own: the others' reach their own hop alone
                    for r in range(K):
                        apart[r] = np.float32(0.0) if r == given or (last and r == K - 1) else pi[r]
                total += _halting_right(g_halt_w, g_halt_b, states, probs, h, target)
            for r in range(first, K):  # loss: Σ_k π_k (CE_k + halt_cost (k - 1)), or CE_K
                cost[r] = ce[r] + (halt_cost * r if stopping and not right else np.float32(0.0))
                total += pi[r] * cost[r]
            g_scores[:] = 0.0
            if supervision > 0:
                total += _supervise(scores, g_scores, attends, pi, cost, support[q], n_support[q], L, supervision,
                                    stopping and not right)
            if last or own_hops:  # the answers whose inputs' gradient is stopped: into W and the module, then
                # the rest as usual (the inputs' gradients these passes leave are overwritten there);
                # right_own keeps their ∂o^k for their own hops (the question's part is dropped)
                _state_grads(W, g_W, states, probs, apart, g_state, target, first)
                if own_hops:
                    g_own[:] = g_state
                if hidden:
                    _module_backward(U, V, g_U, g_U_b, g_V, u[0], reads, third, pre, probs, apart, g_question, g_reads,
                                     g_third, g_pre, target, first, product or summed)
                    if own_hops:
                        for r in range(first, K):
                            for k in range(d):  # product: x_k = u^1_k o_k, ∂o_k = u^1_k ∂x_k
                                g_own[r, k] += g_reads[r, k] + (u[0, k] * g_third[r, k] if product else np.float32(0.0))
                for r in range(K):
                    pi[r] -= apart[r]
            _state_grads(W, g_W, states, probs, pi, g_state, target, first)
            if hidden:
                _module_backward(U, V, g_U, g_U_b, g_V, u[0], reads, third, pre, probs, pi, g_question, g_reads,
                                 g_third, g_pre, target, first, product or summed)
                if product:  # x_k = u^1_k o_k: ∂u^1_k = o_k ∂x_k, ∂o_k = u^1_k ∂x_k
                    for r in range(first, K):
                        for k in range(d):
                            g_question[k] += reads[r, k] * g_third[r, k]
                            g_reads[r, k] += u[0, k] * g_third[r, k]
                if summed:
                    total += _gates_backward(g_scores, g_sum_b, g_third, gates, summands, attends, support[q], L,
                                             supervision)
            if stopping and not right:
                _halting_backward(halt_w, g_halt_w, g_halt_b, states, h, reach, cost, g_state)
            _hops_backward(tables, g_tables, g_x, u, p, attends, visited, g_state, g_scores, g_reads, g_question, H, g_H,
                           g_log_penalty, g_u, g_o, g_next, g_p, g_earlier, (rel, g_rel, relq, g_relq, wq, g_wq), ages[b],
                           penalty, L, linear, layerwise, readout, asked, (stick, mixed, scores, mix, g_mix, parts),
                           (own_hops, g_own, g_own_p, g_own_wq, g_dropped))
            aged = max(aged, _table_grads(g_emb, g_B, g_temporal, g_x, words[q], coef[q], n_words[q], ages[b], L, d, e))
            if summed:  # into C^k's word rows, not T(i)
                _summands_backward(g_emb, g_third, gates, summands, attends, words[q], coef[q], n_words[q], e, L, layerwise)
        _sgd(params, grads, answer_bag, aged, lr, max_norm, own)
    return total


@numba.njit(**JIT, inline="always")
def _penalty(log_penalty, linear, linear_penalty):
    """Soft masking's e^x on a chosen memory's score; none during linear start without
    model.mask_linear_start (there p_i is the score itself)."""
    return np.exp(log_penalty[0]) if linear_penalty or not linear else np.float32(0.0)


@numba.njit(**JIT, inline="always")
def _workspace(M1, Td, K, d, n_answers):
    """The arrays one question's forward and backward pass reuse."""
    x, g_x = np.empty((M1, Td), np.float32), np.empty((M1, Td), np.float32)  # x[i, t*d:(t+1)*d]: table t on slot i
    tables, g_tables = x.reshape((M1, Td // d, d)), g_x.reshape((M1, Td // d, d))  # the same as [i, t, k]
    p, scores, g_scores = np.empty((K, M1), np.float32), np.empty((K, M1), np.float32), np.empty((K, M1), np.float32)
    attends, visited = np.empty((K, M1), np.bool_), np.empty((K, M1), np.bool_)  # may attend; soft masking's chosen
    u, reads, g_state = np.empty((K + 1, d), np.float32), np.empty((K, d), np.float32), np.empty((K, d), np.float32)
    probs = np.empty((K, n_answers), np.float32)  # â_k
    g_p = np.empty(M1, np.float32)
    return x, g_x, tables, g_tables, p, scores, g_scores, attends, visited, u, reads, g_state, probs, g_p


@numba.njit(**JIT, inline="always")
def _answer_probs(W, states, extra, probs, ce, target, first):
    """â_r = softmax(W^r state_r + extra_r) into probs[r], and its cross-entropy into ce[r], for
    r >= first (extra: the answer module's logits, or zeros)."""
    K, n_answers = states.shape[0], W.shape[1]
    ce[:] = 0.0
    for r in range(first, K):
        top = probs[r, _hop_logits(W[r], states[r], extra[r], probs[r])]
        target_logit = probs[r, target] - top if target >= 0 else np.float32(0.0)
        norm = np.float32(0.0)
        for a in range(n_answers):
            probs[r, a] = np.exp(probs[r, a] - top)
            norm += probs[r, a]
        for a in range(n_answers):
            probs[r, a] /= norm
        if target >= 0:  # else no answer among the classes: no cross-entropy
            ce[r] = np.log(norm) - target_logit


@numba.njit(**JIT, inline="always")
def _halting(halt_w, halt_b, states, h, reach, pi, stopping):
    """π_k = h_k Π_{j<k} (1 - h_j) (reach_k = Π_{j<k} (1 - h_j)), h_k = σ(w_h · state_k + b_h),
    h_K = 1; without stopping π = (0, .., 1)."""
    K, d = states.shape
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


@numba.njit(**JIT, inline="always")
def _stop_hop(h, threshold, start):
    """The hop (0-based) the stopping rule answers from: the first from `start` on whose h_k passes
    the threshold, or the last."""
    K = h.shape[0]
    for r in range(start, K - 1):
        if h[r] > threshold:
            return r
    return K - 1


@numba.njit(**JIT, inline="always")
def _hop_logits(W_r, state, extra_r, logits):
    """Hop r's answer logits W^r state_r + extra_r into logits; returns the first of their argmaxes
    (as torch's argmax)."""
    n_answers, d = W_r.shape
    best = 0
    for a in range(n_answers):
        logit = extra_r[a]
        for k in range(d):
            logit += W_r[a, k] * state[k]
        logits[a] = logit
        if logit > logits[best]:
            best = a
    return best


@numba.njit(**JIT, inline="always")
def _top_probability(logits, best):
    """max_a softmax(logits)_a, logits[best] being their largest."""
    norm = np.float32(0.0)
    for a in range(logits.shape[0]):
        norm += np.exp(logits[a] - logits[best])
    return np.float32(1.0) / norm


@numba.njit(**JIT, inline="always")
def _halting_right(g_halt_w, g_halt_b, states, probs, h, target):
    """halt_training right: BCE of h_k toward [argmax â_k = answer] for k < K, into the halting
    unit alone (the states pass no gradient back). Returns the loss."""
    K, d = states.shape
    loss = 0.0
    if target < 0:
        return loss
    for r in range(K - 1):
        best = 0
        for a in range(probs.shape[1]):
            if probs[r, a] > probs[r, best]:
                best = a
        y = np.float32(1.0) if best == target else np.float32(0.0)
        loss -= np.log(max(h[r] if y > 0 else np.float32(1.0) - h[r], np.float32(1e-30)))
        g_z = h[r] - y
        g_halt_b[0] += g_z
        for k in range(d):
            g_halt_w[k] += g_z * states[r, k]
    return loss


@numba.njit(**JIT, inline="always")
def _supervise(scores, g_scores, attends, pi, cost, support, n_support, L, supervision, stopping):
    """Attention supervision: hop k's scores pulled to the k-th supporting fact, the halting to
    their number. Returns its loss; fills g_scores and adds to ∂loss/∂π."""
    K = scores.shape[0]
    loss = 0.0
    for hop in range(min(K, support.shape[0])):
        fact = support[hop] + 1  # its slot; 0: none, or out of memory
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
            loss += supervision * (np.log(norm) - (scores[hop, fact] - top))
            for i in range(1, L + 1):
                g_scores[hop, i] *= supervision / norm
            g_scores[hop, fact] -= supervision
    if stopping:
        want = min(max(n_support, 1), K) - 1
        loss -= supervision * np.log(max(pi[want], np.float32(1e-8)))
        if pi[want] > 1e-8:
            cost[want] -= supervision / pi[want]
    return loss


@numba.njit(**JIT, inline="always")
def _state_grads(W, g_W, states, probs, pi, g_state, target, first):
    """∂loss/∂state_k through â_k (weighted by π_k) into g_state, and ∂W^k into g_W[k]."""
    K, n_answers, d = states.shape[0], W.shape[1], W.shape[2]
    g_state[:] = 0.0
    if target < 0:
        return
    for r in range(first, K):
        state, g_state_r = states[r], g_state[r]
        for a in range(n_answers):
            g_logit = pi[r] * (probs[r, a] - np.float32(1.0 if a == target else 0.0))
            W_a, g_W_a = W[r, a], g_W[r, a]
            for k in range(d):
                g_W_a[k] += g_logit * state[k]
            for k in range(d):
                g_state_r[k] += g_logit * W_a[k]


@numba.njit(**JIT, inline="always")
def _halting_backward(halt_w, g_halt_w, g_halt_b, states, h, reach, cost, g_state):
    """∂h_j = reach_j (cost_j - Σ_{k>j} cost_k h_k Π_{j<i<k} (1 - h_i)), cost_k = ∂loss/∂π_k;
    through σ into the halting unit and the states."""
    K, d = states.shape
    later = np.float32(0.0)
    for r in range(K - 2, -1, -1):
        later = cost[r + 1] * h[r + 1] + (np.float32(1.0) - h[r + 1]) * later
        g_z = h[r] * (np.float32(1.0) - h[r]) * reach[r] * (cost[r] - later)
        g_halt_b[0] += g_z
        for k in range(d):
            g_halt_w[k] += g_z * states[r, k]
            g_state[r, k] += g_z * halt_w[k]


@numba.njit(**JIT, inline="always")
def _hops_backward(tables, g_tables, g_x, u, p, attends, visited, g_state, g_scores, g_reads, g_question, H, g_H,
                   g_log_penalty, g_u, g_o, g_next, g_p, g_earlier, pointer, ages, penalty, L, linear, layerwise,
                   readout, asked, attention, own_hops):
    """Back through the K hops, from ∂state_k (g_state), ∂score (g_scores), and the answer
    module's ∂o^k (g_reads) and ∂u^1 (g_question) to ∂x (g_x: each table on each slot), ∂H,
    ∂log_penalty and the pointer in time's ∂w (g_rel) and ∂r (g_relq), through hop k's w^k + r^k u^k (wq);
    attention: (stick, mixed, scores, g, ∂g, parts), stick-breaking's β_i = σ(score_i) from the forward
    pass's scores, and with mixed, each hop's g_k, its gradient, and the two distributions it mixed;
    own_hops: (right_own, g_own, g_own_p, g_own_wq, g_dropped), the early answers' ∂o^k (K, d), which
    reach hop k's read-out, attention and pointer weights but not its input u^k nor p^{k-1} (and work
    space for them: their ∂score, ∂w, and the ∂p^{k-1} that is dropped)."""
    stick, mixed, scores, mix, g_mix, parts = attention
    own, g_own, g_own_p, g_own_wq, g_dropped = own_hops
    K, d = p.shape[0], u.shape[1]
    rel, g_rel, relq, g_relq, wq, g_wq = pointer
    relative, query = rel.shape[1] > 1, relq.shape[1] > 1
    g_earlier[:] = 0.0
    g_x[:L + 1] = 0.0
    g_u[:] = 0.0
    if not (readout or asked):
        g_u[:] = g_state[K - 1]  # ∂u^{K+1}
    for hop in range(K - 1, -1, -1):
        if readout or asked:
            for k in range(d):  # ∂o^k: through u^{k+1} = u^k + o^k, and as â_k's state
                g_o[k] = g_u[k] + g_state[hop, k]
        else:
            if hop < K - 1:
                for k in range(d):  # ∂u^{k+1} as â_k's state
                    g_u[k] += g_state[hop, k]
            g_o[:] = g_u
        for k in range(d):  # ∂o^k as the answer module's input
            g_o[k] += g_reads[hop, k]
        a_table, c_table = (1, 2) if layerwise else (hop, hop + 1)
        if own:  # the early answer's ∂o^k alone: its ∂score, kept apart from the rest
            g_dropped[:] = 0.0
            _scores_backward(g_own[hop], g_own_p, g_dropped, tables, g_tables, c_table, hop, p, attends, L, linear,
                             attention)
        _scores_backward(g_o, g_p, g_earlier, tables, g_tables, c_table, hop, p, attends, L, linear, attention)
        g_earlier[:] = 0.0  # read: now hop k's scores add to ∂p^{k-1}
        u_k = u[hop]
        if query and hop > 0:
            g_wq[hop] = 0.0
            g_own_wq[hop] = 0.0
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
                g_score = g_p[i] + g_scores[hop, i]
                g_mine = g_own_p[i] if own else np.float32(0.0)  # the early answer's: into m_i, not u^k
                if visited[hop, i]:  # score_i - e^{log_penalty}
                    g_log_penalty[0] -= (g_score + g_mine) * penalty
                for k in range(d):
                    g_tables[i, a_table, k] += (g_score + g_mine) * u_k[k]  # ∂m_i = ∂score_i u^k
                    g_u[k] += g_score * tables[i, a_table, k]  # ∂u^k gets Σ_i ∂score_i m_i
                if relative and hop > 0:  # score_i += Σ_j p^{k-1}_j w^k[age_i - age_j]
                    # into ∂w^k directly, or with the state's r^k, into ∂w (summed into ∂w^k, ∂r^k and ∂u^k below)
                    _pointer_backward(wq[hop], g_wq[hop] if query else g_rel[hop - 1], p[hop - 1], g_earlier, ages, i,
                                      g_score, L)
                    if own:  # into the weights alone
                        _pointer_backward(wq[hop], g_own_wq[hop] if query else g_rel[hop - 1], p[hop - 1], g_dropped,
                                          ages, i, g_mine, L)
        if query and hop > 0:  # w = w^k + r^k u^k: ∂w^k = ∂w, ∂r^k = ∂w u^k, ∂u^k += r^k^T ∂w
            g_w, g_w_own = g_wq[hop], g_own_wq[hop]
            for t in range(g_w.shape[0]):
                g_all = g_w[t] + (g_w_own[t] if own else np.float32(0.0))
                g_rel[hop - 1, t] += g_all
                for k in range(d):
                    g_relq[hop - 1, t, k] += g_all * u_k[k]
                    g_u[k] += relq[hop - 1, t, k] * g_w[t]
    for k in range(d):  # u^1 = B q, and the answer module's input
        g_x[0, k] += g_u[k] + g_question[k]
    if asked:  # and u^1 in each state u^1 + o^k
        for hop in range(K):
            for k in range(d):
                g_x[0, k] += g_state[hop, k]


@numba.njit(**JIT, inline="always")
def _scores_backward(g_o, g_p, g_before, tables, g_tables, c_table, hop, p, attends, L, linear, attention):
    """Hop `hop`'s attention backward from ∂o^k (g_o) and ∂p^k from the next hop's pointer in time
    (g_before): ∂c_i = p_i ∂o into g_tables, ∂g_k into the mixed gates' gradient, and ∂score_i into
    g_p (for the slots the hop attends to), through the softmax, stick-breaking or their mix."""
    stick, mixed, scores, mix, g_mix, parts = attention
    d = g_o.shape[0]
    weighted = np.float32(0.0)  # Σ_j p_j ∂p_j
    for i in range(1, L + 1):
        if attends[hop, i]:
            p_i = p[hop, i]
            g_p_i = np.float32(0.0)
            for k in range(d):
                g_p_i += tables[i, c_table, k] * g_o[k]  # ∂p_i = c_i · ∂o
                g_tables[i, c_table, k] += p_i * g_o[k]  # ∂c_i = p_i ∂o
            g_p_i += g_before[i]  # as the next hop's pointer in time read it
            g_p[i] = g_p_i
            weighted += p_i * g_p_i
    if stick:  # p_i = β_i Π_{j<i} (1 - β_j): ∂s_i = ∂p_i p_i (1 - β_i) - β_i Σ_{j>i} ∂p_j p_j
        later = np.float32(0.0)
        for i in range(L, 0, -1):
            if attends[hop, i]:
                beta = np.float32(1.0) / (np.float32(1.0) + np.exp(-scores[hop, i]))
                g_p_i = g_p[i]
                g_p[i] = g_p_i * p[hop, i] * (np.float32(1.0) - beta) - beta * later
                later += g_p_i * p[hop, i]
    elif mixed:  # p = σ(g) stick + (1 - σ(g)) soft: ∂g = σ'(g) Σ_i ∂p_i (stick_i - soft_i), ∂s through both
        share = np.float32(1.0) / (np.float32(1.0) + np.exp(-mix[hop]))
        weighted = np.float32(0.0)  # Σ_j soft_j ∂p_j
        for i in range(1, L + 1):
            if attends[hop, i]:
                weighted += parts[1, hop, i] * g_p[i]
        later, toward = np.float32(0.0), np.float32(0.0)
        for i in range(L, 0, -1):
            if attends[hop, i]:
                beta = np.float32(1.0) / (np.float32(1.0) + np.exp(-scores[hop, i]))
                g_p_i, stuck, soft_i = g_p[i], parts[0, hop, i], parts[1, hop, i]
                toward += g_p_i * (stuck - soft_i)
                g_p[i] = share * (g_p_i * stuck * (np.float32(1.0) - beta) - beta * later) + (np.float32(1.0) - share) * (
                    g_p_i if linear else soft_i * (g_p_i - weighted))
                later += g_p_i * stuck
        g_mix[hop] += share * (np.float32(1.0) - share) * toward
    elif not linear:  # the softmax: ∂s_i = p_i (∂p_i - Σ_j p_j ∂p_j)
        for i in range(1, L + 1):
            if attends[hop, i]:
                g_p[i] = p[hop, i] * (g_p[i] - weighted)


@numba.njit(**JIT, inline="always")
def _pointer(w, p_before, ages, i, L):
    """The pointer in time's addition to memory i's score: Σ_j p^{k-1}_j w[age_i - age_j] (w of
    2D+1 weights; memory j in slot j)."""
    total = np.float32(0.0)
    for j in range(1, L + 1):
        total += p_before[j] * w[_age_gap(w, ages, i, j)]
    return total


@numba.njit(**JIT, inline="always")
def _pointer_backward(w, g_w, p_before, g_before, ages, i, g_score, L):
    """Back through _pointer from ∂score_i: into ∂w and ∂p^{k-1} (g_before)."""
    for j in range(1, L + 1):
        at = _age_gap(w, ages, i, j)
        g_w[at] += g_score * p_before[j]
        g_before[j] += g_score * w[at]


@numba.njit(**JIT, inline="always")
def _age_gap(w, ages, i, j):
    """w's index for slots i and j: age_i - age_j clipped to ±D, plus D (slot i's age: ages[i - 1])."""
    D = (w.shape[0] - 1) // 2
    return min(max(ages[i - 1] - ages[j - 1], -D), D) + D


@numba.njit(**JIT, inline="always")
def _module(U, U_b, V, question, reads, third, pre, extra, first, three):
    """The answer module: pre[k] = U^T x_k + b for every hop, x_k = [u^1; o^1; ...; o^k; 0 ...]
    (U of (K+1) d rows), [u^1; o^k] (2d rows: answer_reads current) or [u^1; o^k; third_k]
    (3d rows with `three`: u^1 ⊙ o^k with product, s^k with sum), and its logits extra[r] =
    V^T relu(pre[r]) for r >= first."""
    K, d, hidden = reads.shape[0], reads.shape[1], V.shape[0]
    current = three or U.shape[0] == 2 * d  # answer_reads current (with one hop, all reads the same)
    for hop in range(K):
        pre_hop = pre[hop]
        if hop == 0 or current:
            pre_hop[:] = U_b
            for k in range(d):  # + u^1's rows
                q_k, U_k = question[k], U[k]
                for j in range(hidden):
                    pre_hop[j] += q_k * U_k[j]
        else:
            pre_hop[:] = pre[hop - 1]
        row = d if current else (hop + 1) * d
        for k in range(d):  # + o^hop's rows
            o_k, U_k = reads[hop, k], U[row + k]
            for j in range(hidden):
                pre_hop[j] += o_k * U_k[j]
        if three:
            for k in range(d):  # + the third input's rows
                x_k, U_k = third[hop, k], U[2 * d + k]
                for j in range(hidden):
                    pre_hop[j] += x_k * U_k[j]
    extra[:] = 0.0
    for r in range(first, K):
        extra_r = extra[r]
        for j in range(hidden):
            if pre[r, j] > 0.0:
                h_j, V_j = pre[r, j], V[j]
                for a in range(extra_r.shape[0]):
                    extra_r[a] += h_j * V_j[a]


@numba.njit(**JIT, inline="always")
def _module_backward(U, V, g_U, g_U_b, g_V, question, reads, third, pre, probs, pi, g_question, g_reads, g_third,
                     g_pre, target, first, three):
    """Back through the answer module from each answer's ∂logits (π_r (â_r - one-hot)): into
    its U, b, V, and the gradients of the question, the read-outs and the third input
    (g_question, g_reads, g_third)."""
    K, d, hidden = reads.shape[0], reads.shape[1], V.shape[0]
    current = three or U.shape[0] == 2 * d
    g_question[:] = 0.0
    g_reads[:] = 0.0
    g_third[:] = 0.0
    if target < 0:
        return
    for r in range(first, K):
        g_pre[:] = 0.0
        for j in range(hidden):
            if pre[r, j] > 0.0:  # relu
                h_j, V_j, g_V_j = pre[r, j], V[j], g_V[j]
                g = np.float32(0.0)
                for a in range(V_j.shape[0]):
                    g_logit = pi[r] * (probs[r, a] - np.float32(1.0 if a == target else 0.0))
                    g_V_j[a] += h_j * g_logit
                    g += V_j[a] * g_logit
                g_pre[j] = g
                g_U_b[j] += g
        for k in range(d):  # u^1's rows
            g_question[k] += _module_row(U[k], g_U[k], question[k], g_pre)
        for hop in range(r if current else 0, r + 1):  # the rows of the read-outs hop r's answer read
            row = d if current else (hop + 1) * d
            for k in range(d):
                g_reads[hop, k] += _module_row(U[row + k], g_U[row + k], reads[hop, k], g_pre)
        if three:  # the third input's rows
            for k in range(d):
                g_third[r, k] = _module_row(U[2 * d + k], g_U[2 * d + k], third[r, k], g_pre)


@numba.njit(**JIT, inline="always")
def _module_row(U_row, g_U_row, x, g_pre):
    """One input x's row of U: ∂U_row += x ∂pre; returns ∂x = U_row · ∂pre."""
    g_x = np.float32(0.0)
    for j in range(g_pre.shape[0]):
        g_U_row[j] += x * g_pre[j]
        g_x += U_row[j] * g_pre[j]
    return g_x


@numba.njit(**JIT, inline="always")
def _third_input(third, gates, summands, emb, words, coef, n_words, e, question, reads, scores, attends, sum_b,
                 L, layerwise, product, summed):
    """The answer module's third input for every hop: u^1 ⊙ o^k (product), or (summed) s^k =
    Σ_i σ(score_i + b_k) relu(C^k x_i) over the memories hop k may attend to, its gates kept in
    gates and its summands (each sentence's words through C^k, without T(i)) in summands."""
    K, d = reads.shape
    for hop in range(K):
        if product:
            for k in range(d):
                third[hop, k] = question[k] * reads[hop, k]
        elif summed:
            column = (2 if layerwise else hop + 1) * d  # C^k's first column of emb
            third[hop] = 0.0
            for i in range(1, L + 1):
                if attends[hop, i]:
                    g_i = np.float32(1.0) / (np.float32(1.0) + np.exp(-(scores[hop, i] + sum_b[hop])))
                    gates[hop, i] = g_i
                    v = summands[hop, i]
                    v[:] = 0.0
                    for j in range(n_words[i]):
                        a_j, c_j = coef[i, j, 0], coef[i, j, 1]
                        row = emb[words[i, j]]
                        for k in range(d):
                            v[k] += (a_j + e[column + k] * c_j) * row[column + k]
                    for k in range(d):
                        v[k] = max(v[k], np.float32(0.0))
                        third[hop, k] += g_i * v[k]


@numba.njit(**JIT, inline="always")
def _gates_backward(g_scores, g_sum_b, g_sums, gates, summands, attends, support, L, supervision):
    """answer_reads sum: ∂σ_i = relu(C^k x_i) · ∂s^k through σ into hop k's scores and b_k, and with attention
    supervision each gate's binary cross-entropy toward [memory i is a supporting fact]. Returns
    that loss."""
    K, d = g_sums.shape
    loss = 0.0
    for hop in range(K):
        for i in range(1, L + 1):
            if attends[hop, i]:
                g_i = gates[hop, i]
                g_z = np.float32(0.0)
                for k in range(d):
                    g_z += summands[hop, i, k] * g_sums[hop, k]
                g_z *= g_i * (np.float32(1.0) - g_i)
                if supervision > 0:
                    fact = np.float32(0.0)
                    for j in range(support.shape[0]):
                        if support[j] + 1 == i:
                            fact = np.float32(1.0)
                    loss -= supervision * np.log(max(g_i if fact > 0 else np.float32(1.0) - g_i, np.float32(1e-30)))
                    g_z += supervision * (g_i - fact)
                g_scores[hop, i] += g_z
                g_sum_b[hop] += g_z
    return loss


@numba.njit(**JIT, inline="always")
def _summands_backward(g_emb, g_sums, gates, summands, attends, words, coef, n_words, e, L, layerwise):
    """answer_reads sum: σ_i ∂s^k through the ReLU into the rows of C^k of sentence i's words,
    for every hop (T(i) is not in the sum)."""
    K, d = g_sums.shape
    for hop in range(K):
        column = (2 if layerwise else hop + 1) * d
        for i in range(1, L + 1):
            if attends[hop, i]:
                for j in range(n_words[i]):
                    a_j, c_j = coef[i, j, 0], coef[i, j, 1]
                    g_row = g_emb[words[i, j]]
                    for k in range(d):
                        if summands[hop, i, k] > 0:
                            g_row[column + k] += (a_j + e[column + k] * c_j) * gates[hop, i] * g_sums[hop, k]


@numba.njit(**JIT, inline="always")
def _question_states(states, u, reads):
    """state_k = u^1 + o^k: the question and what hop k read."""
    for hop in range(states.shape[0]):
        for k in range(states.shape[1]):
            states[hop, k] = u[0, k] + reads[hop, k]


@numba.njit(**JIT, inline="always")
def _table_grads(g_emb, g_B, g_temporal, g_x, words, coef, n_words, ages, L, d, e):
    """∂x back through the sparse sentences into the tables' rows (g_emb; the question's, slot 0,
    into g_B's first d columns) and T(age) (g_temporal). Returns how many rows of T(i) it touched
    (ages below it)."""
    Td, n_ages = g_emb.shape[1], g_temporal.shape[0]
    aged = 0
    for j in range(n_words[0]):  # the question: B's columns alone (with offset, B' of A^1 + B')
        a_j, c_j = coef[0, j, 0], coef[0, j, 1]
        g_row = g_B[words[0, j]]
        for k in range(d):
            g_row[k] += (a_j + e[k] * c_j) * g_x[0, k]
    for i in range(1, L + 1):
        g_x_i = g_x[i]
        for j in range(n_words[i]):
            a_j, c_j = coef[i, j, 0], coef[i, j, 1]
            g_row = g_emb[words[i, j]]
            for tk in range(Td):
                g_row[tk] += (a_j + e[tk] * c_j) * g_x_i[tk]
        if n_ages > 0:
            age = min(ages[i - 1], n_ages - 1)
            aged = max(aged, age + 1)
            g_row = g_temporal[age]
            for tk in range(Td):
                g_row[tk] += g_x_i[tk]
    return aged


@numba.njit(**JIT, inline="always")
def _sgd(params, grads, answer_bag, aged, lr, max_norm, own):
    """∂W^k into C^K's rows (own: C^k's), then SGD with this seed's gradient norm clipped at max_norm."""
    emb, temporal, halt_w, halt_b, H, log_penalty, U, U_b, V, rel, relq, sum_b, own_b, mix = params
    g_emb, g_temporal, g_halt_w, g_halt_b, g_H, g_log_penalty, g_U, g_U_b, g_V, g_W, g_rel, g_relq, g_sum_b, g_own_b, \
        g_mix = grads
    Td, d = emb.shape[1], g_W.shape[2]
    for r in range(g_W.shape[0]):  # W^r = answer_bag C^K (own: C^r, table r + 1)
        column = (r + 1) * d if own else Td - d
        for a in range(answer_bag.shape[0]):
            for v in range(answer_bag.shape[1]):
                if answer_bag[a, v] != 0.0:
                    for k in range(d):
                        g_emb[v, column + k] += answer_bag[a, v] * g_W[r, a, k]
    norm = np.sqrt(_squares(g_emb.ravel()) + _squares(g_temporal[:aged].ravel()) + _squares(g_halt_w)
                   + _squares(g_halt_b) + _squares(g_H.ravel()) + _squares(g_log_penalty) + _squares(g_U.ravel())
                   + _squares(g_U_b) + _squares(g_V.ravel()) + _squares(g_rel.ravel()) + _squares(g_relq.ravel())
                   + _squares(g_sum_b) + _squares(g_own_b.ravel()) + _squares(g_mix))
    step = np.float32(lr * min(1.0, max_norm / (norm + 1e-6)))
    _descend(emb.ravel(), g_emb.ravel(), step)
    _descend(temporal[:aged].ravel(), g_temporal[:aged].ravel(), step)
    g_temporal[:aged] = 0.0
    _descend(halt_w, g_halt_w, step)
    _descend(halt_b, g_halt_b, step)
    _descend(H.ravel(), g_H.ravel(), step)
    _descend(log_penalty, g_log_penalty, step)
    _descend(U.ravel(), g_U.ravel(), step)
    _descend(U_b, g_U_b, step)
    _descend(V.ravel(), g_V.ravel(), step)
    _descend(rel.ravel(), g_rel.ravel(), step)
    _descend(relq.ravel(), g_relq.ravel(), step)
    _descend(sum_b, g_sum_b, step)
    _descend(own_b.ravel(), g_own_b.ravel(), step)
    _descend(mix, g_mix, step)


@numba.njit(**JIT)
def _squares(a):
    """Σ a², accumulated in float64 (as torch's gradient-norm clipping)."""
    total = 0.0
    for v in a:
        total += np.float64(v) * np.float64(v)
    return total


@numba.njit(**JIT)
def _descend(a, g, step):
    """a -= step · g, in place."""
    for i in range(a.shape[0]):
        a[i] -= step * g[i]


@numba.njit(**JIT, inline="always")
def _embed(x, emb, B, temporal, words, coef, n_words, ages, L, d, e, offset):
    """x[i] for one question's slots 0..L: every table applied to memory i (at its age), and
    B's first d columns to the question in slot 0 (B: emb, whose table 0 is B, or the question's
    own table; with `offset`, A^1 + B). words, coef, n_words: the question's rows; ages (M,)."""
    Td, n_ages = emb.shape[1], temporal.shape[0]
    x[0] = 0.0
    for j in range(n_words[0]):  # the question: B's columns alone (offset: A^1's and B's)
        a_j, c_j = coef[0, j, 0], coef[0, j, 1]
        row, a1 = B[words[0, j]], emb[words[0, j]]
        for k in range(d):
            x[0, k] += (a_j + e[k] * c_j) * (row[k] + a1[k] if offset else row[k])
    for i in range(1, L + 1):
        x_i = x[i]
        x_i[:] = 0.0
        for j in range(n_words[i]):
            a_j, c_j = coef[i, j, 0], coef[i, j, 1]
            row = emb[words[i, j]]
            for tk in range(Td):
                x_i[tk] += (a_j + e[tk] * c_j) * row[tk]
        if n_ages > 0:
            row = temporal[min(ages[i - 1], n_ages - 1)]
            for tk in range(Td):
                x_i[tk] += row[tk]


@numba.njit(**JIT, inline="always")
def _hops(tables, u, reads, p, attends, visited, scores, H, penalty, rel, relq, wq, ages, L, linear, layerwise, masking,
          soft, null, attention):
    """The K hops over memories 1..L: from u[0] = B q (tables[0, 0]), each hop's attention p[k]
    (scores[k] before the softmax), read-out reads[k] = o^k and state u[k + 1]; attends[k] the
    memories hop k could attend to, visited[k] those soft masking penalises; with the pointer in
    time (rel of 2D+1 columns, D > 0) hop k > 1's scores add Σ_j p^{k-1}_j w[age_i - age_j], w = w^k, or
    w^k + r^k u^k with relq (K-1, 2D+1, d), kept in wq[k] for the backward pass. attention: (stick, mixed,
    g, parts): stick-breaking from slot 1, the most recent memory, instead of the softmax (and of linear
    start's p = score); with mixed, σ(g_k) of it and 1 - σ(g_k) of the softmax, each kept in parts[0 / 1, k]."""
    stick, mixed, mix, parts = attention
    K, d = p.shape[0], u.shape[1]
    relative, query = rel.shape[1] > 1, relq.shape[1] > 1
    u[0] = tables[0, 0]  # u^1 = B q
    attends[:, 0] = False
    attends[0, 1:L + 1] = True
    visited[0] = False
    for hop in range(K):
        a_table, c_table = (1, 2) if layerwise else (hop, hop + 1)  # which tables are A and C
        if hop > 0:
            attends[hop] = attends[hop - 1] if masking == 1 else attends[0]
            visited[hop] = visited[hop - 1]
            if masking or soft:  # the memory the last hop chose (its argmax): blocked, or penalised
                best, choice = 0.0, 0
                for i in range(1, L + 1):
                    if p[hop - 1, i] > best:
                        best, choice = p[hop - 1, i], i
                if masking == 1:
                    attends[hop, choice] = False
                elif choice > 0:
                    visited[hop, choice] = True
                    if masking == 2 and hop == 1:  # second: hop 2 may not attend to hop 1's choice at all
                        attends[hop, choice] = False
        # p_i = softmax_i(u^k · m_i) over the memories it may attend to, and the null memory (score 0)
        p[hop] = 0.0
        top = np.float32(0.0 if null else -np.inf)
        u_k = u[hop]
        if relative and hop > 0:
            w = wq[hop]
            for t in range(w.shape[0]):
                w[t] = rel[hop - 1, t]
                if query:
                    for k in range(d):
                        w[t] += relq[hop - 1, t, k] * u_k[k]
        for i in range(1, L + 1):
            if attends[hop, i]:
                score = np.float32(0.0)
                for k in range(d):
                    score += u_k[k] * tables[i, a_table, k]
                if relative and hop > 0:
                    score += _pointer(wq[hop], p[hop - 1], ages, i, L)
                if visited[hop, i]:  # soft masking lowers a chosen memory's score
                    score -= penalty
                p[hop, i] = score
                scores[hop, i] = score
                top = max(top, score)
        if stick or mixed:  # stick-breaking: p_i = β_i Π_{j<i} (1 - β_j), β = σ(score)
            stuck = p[hop] if stick else parts[0, hop]
            rest = np.float32(1.0)
            for i in range(1, L + 1):
                if attends[hop, i]:
                    beta = np.float32(1.0) / (np.float32(1.0) + np.exp(-scores[hop, i]))
                    stuck[i] = beta * rest
                    rest *= np.float32(1.0) - beta
        if not (stick or linear):  # linear start: p_i = u^k · m_i
            norm = np.exp(-top) if null else np.float32(0.0)
            for i in range(1, L + 1):
                if attends[hop, i]:
                    p[hop, i] = np.exp(p[hop, i] - top)
                    norm += p[hop, i]
            for i in range(1, L + 1):
                if attends[hop, i]:
                    p[hop, i] /= norm
        if mixed:
            share = np.float32(1.0) / (np.float32(1.0) + np.exp(-mix[hop]))
            for i in range(1, L + 1):
                if attends[hop, i]:
                    parts[1, hop, i] = p[hop, i]
                    p[hop, i] = share * parts[0, hop, i] + (np.float32(1.0) - share) * p[hop, i]
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


@numba.njit(**JIT, inline="always")
def _answer_rows(W, emb, answer_bag, own):
    """W (K, A, d): W^r = answer_bag C^K, each answer class's row the sum of its words' rows of the
    last table; own: of hop r's output table C^r (table r + 1, adjacent tying)."""
    Td, d = emb.shape[1], W.shape[2]
    W[:] = 0.0
    for r in range(W.shape[0]):
        column = (r + 1) * d if own else Td - d
        for a in range(answer_bag.shape[0]):
            for v in range(answer_bag.shape[1]):
                if answer_bag[a, v] != 0.0:
                    for k in range(d):
                        W[r, a, k] += answer_bag[a, v] * emb[v, column + k]


@numba.njit(**JIT)
def _seed_predict(params, answer_bag, words, coef, n_words, length, ages, flags, halt_threshold, halt_confidence, K, d):
    """One seed's answer class to each question and the hops it took (the forward pass of
    _seed_epoch, and the stopping rule at inference: past a hop whose answer's probability is
    under halt_confidence, to the next hop whose h_k passes the threshold)."""
    emb, temporal, halt_w, halt_b, H, log_penalty, U, U_b, V, rel, relq, sum_b, own_b, mix = params
    linear, layerwise, masking, soft, null, readout, asked, stopping, product, right, summed, last, own, own_q, offset, \
        stick, mixed, own_hops, linear_penalty = flags
    N, M1 = words.shape[0], words.shape[1]
    Td = emb.shape[1]
    e = ((np.arange(Td) % d + 1) / d).astype(np.float32)  # e_k = k/d, for each table's column k
    W = np.empty((K, answer_bag.shape[0], d), np.float32)
    _answer_rows(W, emb, answer_bag, own)
    B = own_b if own_q else emb  # the question's table: its first d columns
    x = np.empty((M1, Td), np.float32)
    tables = x.reshape((M1, Td // d, d))
    p, scores = np.empty((K, M1), np.float32), np.empty((K, M1), np.float32)
    attends, visited = np.empty((K, M1), np.bool_), np.empty((K, M1), np.bool_)
    u, reads = np.empty((K + 1, d), np.float32), np.empty((K, d), np.float32)
    penalty = _penalty(log_penalty, linear, linear_penalty)
    wq = np.zeros((K, rel.shape[1]), np.float32)  # hop k's pointer weights
    parts = np.zeros((2, K, M1) if mixed else (2, 1, 1), np.float32)  # attention mixed: its two distributions
    states = reads if readout else np.empty((K, d), np.float32) if asked else u[1:]  # (K, d) what â_k reads
    pre, extra = np.zeros((K, V.shape[0]), np.float32), np.zeros((K, W.shape[1]), np.float32)  # the answer module's
    third, gates = np.zeros((K, d), np.float32), np.zeros((K, M1), np.float32)  # its third input; sum's gates
    summands = np.zeros((K if summed else 0, M1, d), np.float32)  # and what it adds up
    h, reach, pi = np.empty(K, np.float32), np.empty(K, np.float32), np.empty(K, np.float32)  # the halting unit's
    logits = np.empty(W.shape[1], np.float32)  # the answer logits of the hop the rule answers from
    answers, hops = np.empty(N, np.int64), np.empty(N, np.int64)
    for q in range(N):
        L = length[q]
        _embed(x, emb, B, temporal, words[q], coef[q], n_words[q], ages[q], L, d, e, offset)
        _hops(tables, u, reads, p, attends, visited, scores, H, penalty, rel, relq, wq, ages[q], L, linear, layerwise,
              masking, soft, null, (stick, mixed, mix, parts))
        if asked:
            _question_states(states, u, reads)
        r = K - 1
        if stopping:  # the first hop whose h_k = σ(w_h · state_k + b_h) passes the threshold
            _halting(halt_w, halt_b, states, h, reach, pi, stopping)
            r = _stop_hop(h, halt_threshold, 0)
        if V.shape[0]:
            if product or summed:
                _third_input(third, gates, summands, emb, words[q], coef[q], n_words[q], e, u[0], reads, scores,
                             attends, sum_b, L, layerwise, product, summed)
            _module(U, U_b, V, u[0], reads, third, pre, extra, r, product or summed)
        best = _hop_logits(W[r], states[r], extra[r], logits)
        while halt_confidence > 0 and r < K - 1 and _top_probability(logits, best) < halt_confidence:
            r = _stop_hop(h, halt_threshold, r + 1)
            best = _hop_logits(W[r], states[r], extra[r], logits)
        hops[q], answers[q] = r + 1, best
    return answers, hops
