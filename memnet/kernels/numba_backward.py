"""The Numba kernel's backward pass, one question at a time: the gradient of its loss from the
answers back through the halting unit, the answer module and the K hops into the tables.
Each function undoes one of memnet/kernels/numba_forward.py's."""
from __future__ import annotations

import numba
import numpy as np

from memnet.kernels.numba_forward import JIT, _age_gap


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
    """∂loss/∂state_k through â_k (weighted by π_k) into g_state, and hop k's ∂W into g_W[k] (summed
    into the table by the step, hop by hop, in the order the reference's autograd sums them)."""
    K, n_answers, d = states.shape[0], W.shape[0], W.shape[1]
    g_state[:] = 0.0
    if target < 0:
        return
    for r in range(first, K):
        if pi[r] == 0.0:  # an answer the loss does not weigh: its gradients are zeros
            continue
        state, g_state_r = states[r], g_state[r]
        for a in range(n_answers):
            g_logit = pi[r] * (probs[r, a] - np.float32(1.0 if a == target else 0.0))
            W_a, g_W_a = W[a], g_W[r, a]
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
def _module_backward(U, V, g_U, g_U_b, g_V, question, reads, pre, probs, pi, g_question, g_reads, g_pre, target, first):
    """Back through the answer module from each answer's ∂logits (π_r (â_r - one-hot)): into
    its U, b, V, and the gradients of the question and the read-outs (g_question, g_reads)."""
    K, d, hidden = reads.shape[0], reads.shape[1], V.shape[0]
    g_question[:] = 0.0
    g_reads[:] = 0.0
    if target < 0:
        return
    for r in range(first, K):
        if pi[r] == 0.0:  # an answer the loss does not weigh: its gradients are zeros
            continue
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
        for k in range(d):  # o^r's rows
            g_reads[r, k] += _module_row(U[d + k], g_U[d + k], reads[r, k], g_pre)


@numba.njit(**JIT, inline="always")
def _module_row(U_row, g_U_row, x, g_pre):
    """One input x's row of U: ∂U_row += x ∂pre; returns ∂x = U_row · ∂pre."""
    g_x = np.float32(0.0)
    for j in range(g_pre.shape[0]):
        g_U_row[j] += x * g_pre[j]
        g_x += U_row[j] * g_pre[j]
    return g_x


@numba.njit(**JIT, inline="always")
def _layerwise_backward(H, g_H, g_u, g_next, u_k):
    """u^{k+1} = H u^k + o: ∂H += ∂u^{k+1} u^k, and g_u becomes ∂u^k = H^T ∂u^{k+1}."""
    d = g_u.shape[0]
    g_next[:] = g_u
    g_u[:] = 0.0
    for k in range(d):
        H_k, g_H_k, g_next_k = H[k], g_H[k], g_next[k]
        for j in range(d):
            g_H_k[j] += g_next_k * u_k[j]
        for j in range(d):
            g_u[j] += H_k[j] * g_next_k


@numba.njit(**JIT, inline="always")
def _query_backward(g_rel, g_relq, g_u, g_w, relq, u_k, hop):
    """w = w^k + r^k u^k: ∂w^k = ∂w, ∂r^k = ∂w u^k, ∂u^k += r^k^T ∂w."""
    d = u_k.shape[0]
    for t in range(g_w.shape[0]):
        g_rel[hop - 1, t] += g_w[t]
        for k in range(d):
            g_relq[hop - 1, t, k] += g_w[t] * u_k[k]
            g_u[k] += relq[hop - 1, t, k] * g_w[t]


@numba.njit(**JIT, inline="always")
def _hops_backward(tables, g_tables, g_x, u, p, attends, visited, g_state, g_scores, g_reads, g_question, H, g_H,
                   g_log_penalty, work, pointer, ages, penalty, L, linear, layerwise, readout, asked, attention):
    """Back through the K hops, from ∂state_k (g_state), ∂score (g_scores), and the answer
    module's ∂o^k (g_reads) and ∂u^1 (g_question) to ∂x (g_x: each table on each slot), ∂H,
    ∂log_penalty and the pointer in time's ∂w (g_rel) and ∂r (g_relq), through hop k's w^k + r^k u^k
    (wq). work: (g_u, g_o, g_next, g_p, g_earlier), ∂u, ∂o, ∂u^{k+1}, ∂score and ∂p^{k-1}.
    attention: (stick, mixed, scores, g, ∂g, parts), as _scores_backward reads it."""
    g_u, g_o, g_next, g_p, g_earlier = work
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
        _scores_backward(g_o, g_p, g_earlier, tables, g_tables, c_table, hop, p, attends, L, linear, attention)
        g_earlier[:] = 0.0  # read: now hop k's scores add to ∂p^{k-1}
        u_k = u[hop]
        if query and hop > 0:
            g_wq[hop] = 0.0
        if layerwise:
            _layerwise_backward(H, g_H, g_u, g_next, u_k)
        for i in range(1, L + 1):
            if attends[hop, i]:
                g_score = g_p[i] + g_scores[hop, i]
                if visited[hop, i]:  # score_i - e^{log_penalty}
                    g_log_penalty[0] -= g_score * penalty
                for k in range(d):
                    g_tables[i, a_table, k] += g_score * u_k[k]  # ∂m_i = ∂score_i u^k
                    g_u[k] += g_score * tables[i, a_table, k]  # ∂u^k gets Σ_i ∂score_i m_i
                if relative and hop > 0:  # score_i += Σ_j p^{k-1}_j w^k[age_i - age_j]: into ∂w^k, or ∂w
                    _pointer_backward(wq[hop], g_wq[hop] if query else g_rel[hop - 1], p[hop - 1], g_earlier, ages, i,
                                      g_score, L)
        if query and hop > 0:
            _query_backward(g_rel, g_relq, g_u, g_wq[hop], relq, u_k, hop)
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
    elif mixed:
        _mixed_backward(g_p, hop, p, attends, L, linear, scores, mix, g_mix, parts)
    elif not linear:  # the softmax: ∂s_i = p_i (∂p_i - Σ_j p_j ∂p_j)
        for i in range(1, L + 1):
            if attends[hop, i]:
                g_p[i] = p[hop, i] * (g_p[i] - weighted)


@numba.njit(**JIT, inline="always")
def _mixed_backward(g_p, hop, p, attends, L, linear, scores, mix, g_mix, parts):
    """p = σ(g) stick + (1 - σ(g)) soft: ∂g = σ'(g) Σ_i ∂p_i (stick_i - soft_i), ∂s through both."""
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


@numba.njit(**JIT, inline="always")
def _pointer_backward(w, g_w, p_before, g_before, ages, i, g_score, L):
    """Back through the pointer's addition to score_i: into ∂w and ∂p^{k-1} (g_before)."""
    for j in range(1, L + 1):
        at = _age_gap(w, ages, i, j)
        g_w[at] += g_score * p_before[j]
        g_before[j] += g_score * w[at]


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
