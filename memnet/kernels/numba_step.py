"""The Numba kernel's training: one seed's epoch of SGD steps, each question's forward and
backward pass (memnet/kernels/numba_forward.py, numba_backward.py) and the clipped SGD update."""
from __future__ import annotations

import numba
import numpy as np

from memnet.kernels.numba_backward import (_halting_backward, _halting_right, _hops_backward, _module_backward,
                                           _state_grads, _supervise, _table_grads)
from memnet.kernels.numba_forward import (JIT, _answer_probs, _answer_rows, _embed, _halting, _hops, _module,
                                          _question_states, _stop_hop)


@numba.njit(**JIT)
def _seed_epoch(params, answer_bag, data, order, ages, batch_size, flags, hyper, K, d):
    """One seed's epoch of SGD steps; its parameters (emb, temporal, halt_w, halt_b, H,
    log_penalty, the answer module's U, b, V, the pointer's w and r, the question's own table and
    the mixed gates) are updated in place. Returns the summed loss."""
    emb = params[0]
    lr, max_norm = hyper[0], hyper[3]
    M1, n_answers = data[0].shape[1], answer_bag.shape[0]
    grads = (np.empty_like(emb), np.zeros_like(params[1]), np.empty_like(params[2]), np.empty_like(params[3]),
             np.empty_like(params[4]), np.empty_like(params[5]), np.empty_like(params[6]), np.empty_like(params[7]),
             np.empty_like(params[8]), np.empty((K, n_answers, d), np.float32), np.empty_like(params[9]),
             np.empty_like(params[10]), np.empty_like(params[11]), np.empty_like(params[12]))
    work = _workspace(M1, emb.shape[1], K, d, n_answers, params, flags)
    e = ((np.arange(emb.shape[1]) % d + 1) / d).astype(np.float32)  # e_k = k/d, for each table's column k
    total = 0.0
    N = order.shape[0]
    for start in range(0, N, batch_size):
        _clear(grads)
        _answer_rows(work[0], emb, answer_bag)
        aged = 0  # rows of g_temporal this step touches: T(age) for the ages < aged
        for b in range(start, min(start + batch_size, N)):
            loss, touched = _question_step(params, grads, work, e, data, order[b], ages[b], flags, hyper, K, d)
            total += loss
            aged = max(aged, touched)
        _sgd(params, grads, answer_bag, aged, lr, max_norm)
    return total


@numba.njit(**JIT, inline="always")
def _clear(grads):
    """Every gradient but T(i)'s to zero (the step clears the rows of T(i) it touched)."""
    g_emb, _, g_halt_w, g_halt_b, g_H, g_log_penalty, g_U, g_U_b, g_V, g_W, g_rel, g_relq, g_own_b, g_mix = grads
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
    g_own_b[:] = 0.0
    g_mix[:] = 0.0


@numba.njit(**JIT, inline="always")
def _workspace(M1, Td, K, d, n_answers, params, flags):
    """The arrays one question's forward and backward pass reuse, as a tuple (see _question_step)."""
    readout, asked, mixed = flags[5], flags[6], flags[12]
    rel, hidden = params[9], params[8].shape[0]
    x, g_x = np.empty((M1, Td), np.float32), np.empty((M1, Td), np.float32)  # x[i, t*d:(t+1)*d]: table t on slot i
    u, reads = np.empty((K + 1, d), np.float32), np.empty((K, d), np.float32)
    # (K, d) what â_k reads: o^k, u^1 + o^k or u^{k+1}
    states = reads if readout else np.empty((K, d), np.float32) if asked else u[1:]
    return (np.empty((n_answers, d), np.float32), x, g_x, x.reshape((M1, Td // d, d)), g_x.reshape((M1, Td // d, d)),
            np.empty((K, M1), np.float32), np.empty((K, M1), np.float32), np.empty((K, M1), np.float32),  # p, scores, g
            np.empty((K, M1), np.bool_), np.empty((K, M1), np.bool_),  # may attend; soft masking's chosen
            u, reads, states, np.empty((K, d), np.float32), np.empty((K, n_answers), np.float32),  # ∂state, â_k
            np.zeros((2, K, M1) if mixed else (2, 1, 1), np.float32),  # attention mixed: stick-breaking, softmax
            np.empty((5, K), np.float32),  # CE(â_k), h_k, Π_{j<k}(1 - h_j), π_k, ∂loss/∂π_k
            np.zeros(K, np.float32),  # right_last: the weights of the answers whose inputs' gradient is stopped
            np.zeros((K, hidden), np.float32), np.zeros((K, n_answers), np.float32),  # U x_k + b; its logits
            np.zeros((K, d), np.float32), np.zeros(d, np.float32), np.empty(hidden, np.float32),  # ∂o, ∂u^1, ∂pre
            np.zeros((K, rel.shape[1]), np.float32), np.zeros((K, rel.shape[1]), np.float32),  # w^k (+ r^k u^k), ∂
            np.empty(d, np.float32), np.empty(d, np.float32), np.empty(d, np.float32),  # ∂u, ∂o, ∂u^{k+1}
            np.empty(M1, np.float32), np.zeros(M1, np.float32))  # ∂score, ∂p^{k-1} through the pointer


@numba.njit(**JIT, inline="always")
def _question_step(params, grads, work, e, data, q, ages, flags, hyper, K, d):
    """Question q's loss and its gradient added into grads; returns (loss, rows of T(i) touched)."""
    emb, temporal, halt_w, halt_b, H, log_penalty, U, U_b, V, rel, relq, own_b, mix = params
    g_emb, g_temporal, g_halt_w, g_halt_b, g_H, g_log_penalty, g_U, g_U_b, g_V, g_W, g_rel, g_relq, g_own_b, g_mix = grads
    W, x, g_x, tables, g_tables, p, scores, g_scores, attends, visited, u, reads, states, g_state, probs, parts, \
        halt, apart, pre, extra, g_reads, g_question, g_pre, wq, g_wq, g_u, g_o, g_next, g_p, g_earlier = work
    ce, h, reach, pi, cost = halt[0], halt[1], halt[2], halt[3], halt[4]
    words, coef, n_words, length, answer, support, n_support = data
    linear, layerwise, masking, soft, null, readout, asked, stopping, right, last, offset, stick, mixed = flags
    lr, halt_cost, supervision, max_norm, early, threshold, early_hop1 = hyper
    hidden = V.shape[0]
    B, g_B = (own_b, g_own_b) if offset else (emb, g_emb)  # the question's table: its first d columns
    penalty = np.exp(log_penalty[0])  # soft masking's e^x
    first = 0 if stopping else K - 1  # the hops the answer may come from: all with the stopping rule, else the last
    L, target = length[q], answer[q]
    _embed(x, emb, B, temporal, words[q], coef[q], n_words[q], ages, L, d, e, offset)
    _hops(tables, u, reads, p, attends, visited, scores, H, penalty, (rel, relq, wq), ages, L, linear, layerwise,
          masking, soft, null, (stick, mixed, mix, parts))
    if asked:
        _question_states(states, u, reads)
    if hidden:
        _module(U, U_b, V, u[0], reads, pre, extra, first)
    _answer_probs(W, states, extra, probs, ce, target, first)
    _halting(halt_w, halt_b, states, h, reach, pi, stopping)
    total = 0.0
    if right:  # the answer the rule gives at 1, every other at early_answers; h_k learns whether â_k is right
        given = _stop_hop(h, threshold, 0)
        pi[:] = early
        pi[0] = early_hop1  # model.early_answers_hop1 (early_answers where that is -1)
        pi[given] = 1.0
        if last:  # right_last: the last hop's at 1 too; the others' reach the answer layer alone
            pi[K - 1] = 1.0
            for r in range(K):
                apart[r] = np.float32(0.0) if r == given or r == K - 1 else pi[r]
        total += _halting_right(g_halt_w, g_halt_b, states, probs, h, target)
    for r in range(first, K):  # loss: Σ_k π_k (CE_k + halt_cost (k - 1)), or CE_K
        cost[r] = ce[r] + (halt_cost * r if stopping and not right else np.float32(0.0))
        total += pi[r] * cost[r]
    g_scores[:] = 0.0
    if supervision > 0:
        total += _supervise(scores, g_scores, attends, pi, cost, support[q], n_support[q], L, supervision,
                            stopping and not right)
    if last:  # the answers whose inputs' gradient is stopped: into W and the module alone (the inputs'
        # gradients this pass leaves are overwritten below)
        _state_grads(W, g_W, states, probs, apart, g_state, target, first)
        if hidden:
            _module_backward(U, V, g_U, g_U_b, g_V, u[0], reads, pre, probs, apart, g_question, g_reads, g_pre,
                             target, first)
        for r in range(K):
            pi[r] -= apart[r]
    _state_grads(W, g_W, states, probs, pi, g_state, target, first)
    if hidden:
        _module_backward(U, V, g_U, g_U_b, g_V, u[0], reads, pre, probs, pi, g_question, g_reads, g_pre, target, first)
    if stopping and not right:
        _halting_backward(halt_w, g_halt_w, g_halt_b, states, h, reach, cost, g_state)
    _hops_backward(tables, g_tables, g_x, u, p, attends, visited, g_state, g_scores, g_reads, g_question, H, g_H,
                   g_log_penalty, (g_u, g_o, g_next, g_p, g_earlier), (rel, g_rel, relq, g_relq, wq, g_wq), ages,
                   penalty, L, linear, layerwise, readout, asked, (stick, mixed, scores, mix, g_mix, parts))
    return total, _table_grads(g_emb, g_B, g_temporal, g_x, words[q], coef[q], n_words[q], ages, L, d, e)


@numba.njit(**JIT, inline="always")
def _sgd(params, grads, answer_bag, aged, lr, max_norm):
    """Each hop's ∂W into C^K's rows, then SGD with this seed's gradient norm clipped at max_norm."""
    g_emb, g_temporal, g_W = grads[0], grads[1], grads[9]
    Td, d = g_emb.shape[1], g_W.shape[2]
    for r in range(g_W.shape[0]):  # W = answer_bag C^K
        for a in range(answer_bag.shape[0]):
            for v in range(answer_bag.shape[1]):
                if answer_bag[a, v] != 0.0:
                    for k in range(d):
                        g_emb[v, Td - d + k] += answer_bag[a, v] * g_W[r, a, k]
    emb, temporal, halt_w, halt_b, H, log_penalty, U, U_b, V, rel, relq, own_b, mix = params
    _, _, g_halt_w, g_halt_b, g_H, g_log_penalty, g_U, g_U_b, g_V, _, g_rel, g_relq, g_own_b, g_mix = grads
    norm = np.sqrt(_squares(g_emb.ravel()) + _squares(g_temporal[:aged].ravel()) + _squares(g_halt_w)
                   + _squares(g_halt_b) + _squares(g_H.ravel()) + _squares(g_log_penalty) + _squares(g_U.ravel())
                   + _squares(g_U_b) + _squares(g_V.ravel()) + _squares(g_rel.ravel()) + _squares(g_relq.ravel())
                   + _squares(g_own_b.ravel()) + _squares(g_mix))
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
