"""The Numba kernel's forward pass, one question at a time (see memnet/kernels/numba_memn2n.py
for the layout): the sentences embedded, the K hops, the answers, the halting unit, and a
seed's predictions with the stopping rule."""
from __future__ import annotations

import numba
import numpy as np

JIT = dict(cache=True, nogil=True, fastmath=True, error_model="numpy")


@numba.njit(**JIT, inline="always")
def _embed(x, emb, B, temporal, words, coef, n_words, ages, L, d, e, offset):
    """x[i] for one question's slots 0..L: every table applied to memory i (at its age), and
    table 0 to the question in slot 0 (with `offset`, A^1 + B', B' the question's own table B).
    words, coef, n_words: the question's rows; ages (M,)."""
    Td, n_ages = emb.shape[1], temporal.shape[0]
    x[0] = 0.0
    for j in range(n_words[0]):  # the question: table 0's columns alone (offset: A^1's and B''s)
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
def _visit(p, attends, visited, hop, L, masking, soft):
    """Hop `hop`'s memories from hop - 1's: the memory it chose (its argmax) blocked (masking 1,
    hard; 2, second, at hop 2 alone) or penalised (soft and second)."""
    attends[hop] = attends[hop - 1] if masking == 1 else attends[0]
    visited[hop] = visited[hop - 1]
    if masking or soft:
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


@numba.njit(**JIT, inline="always")
def _attend(p, scores, attends, hop, top, L, linear, null, attention):
    """Hop `hop`'s scores (in p[hop] and scores[hop], their largest `top`) into its attention:
    the softmax (with the null memory's score 0), stick-breaking from slot 1 back, or their mix,
    each distribution kept in parts[0 / 1, hop]; during linear start p = score."""
    stick, mixed, mix, parts = attention
    if stick or mixed:  # stick-breaking: p_i = β_i Π_{j<i} (1 - β_j), β = σ(score)
        stuck = p[hop] if stick else parts[0, hop]
        rest = np.float32(1.0)
        for i in range(1, L + 1):
            if attends[hop, i]:
                beta = np.float32(1.0) / (np.float32(1.0) + np.exp(-scores[hop, i]))
                stuck[i] = beta * rest
                rest *= np.float32(1.0) - beta
    if not (stick or linear):
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


@numba.njit(**JIT, inline="always")
def _pointer_weights(w, rel, relq, u_k, hop):
    """Hop `hop`'s pointer weights w^k, or w^k + r^k u^k with relq, into w."""
    query = relq.shape[1] > 1
    for t in range(w.shape[0]):
        w[t] = rel[hop - 1, t]
        if query:
            for k in range(u_k.shape[0]):
                w[t] += relq[hop - 1, t, k] * u_k[k]


@numba.njit(**JIT, inline="always")
def _hops(tables, u, reads, p, attends, visited, scores, H, penalty, pointer, ages, L, linear, layerwise, masking,
          soft, null, attention):
    """The K hops over memories 1..L: from u[0] = B q (tables[0, 0]), each hop's attention p[k]
    (scores[k] before it), read-out reads[k] = o^k and state u[k + 1]; attends[k] the memories
    hop k could attend to, visited[k] those soft masking penalises. pointer: (rel, relq, wq), the
    pointer in time's w (K-1, 2D+1; D > 0 to use it) and r (K-1, 2D+1, d; with relative_query),
    hop k's weights kept in wq[k] for the backward pass. attention: see _attend."""
    rel, relq, wq = pointer
    K, d = p.shape[0], u.shape[1]
    u[0] = tables[0, 0]  # u^1 = B q
    attends[:, 0] = False
    attends[0, 1:L + 1] = True
    visited[0] = False
    for hop in range(K):
        a_table, c_table = (1, 2) if layerwise else (hop, hop + 1)  # which tables are A and C
        if hop > 0:
            _visit(p, attends, visited, hop, L, masking, soft)
        p[hop] = 0.0
        top = np.float32(0.0 if null else -np.inf)
        u_k = u[hop]
        if rel.shape[1] > 1 and hop > 0:
            _pointer_weights(wq[hop], rel, relq, u_k, hop)
        for i in range(1, L + 1):
            if attends[hop, i]:
                score = np.float32(0.0)
                for k in range(d):
                    score += u_k[k] * tables[i, a_table, k]
                if rel.shape[1] > 1 and hop > 0:
                    score += _pointer(wq[hop], p[hop - 1], ages, i, L)
                if visited[hop, i]:  # soft masking lowers a chosen memory's score
                    score -= penalty
                p[hop, i] = score
                scores[hop, i] = score
                top = max(top, score)
        _attend(p, scores, attends, hop, top, L, linear, null, attention)
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
def _pointer(w, p_before, ages, i, L):
    """The pointer in time's addition to memory i's score: Σ_j p^{k-1}_j w[age_i - age_j] (w of
    2D+1 weights; memory j in slot j)."""
    total = np.float32(0.0)
    for j in range(1, L + 1):
        total += p_before[j] * w[_age_gap(w, ages, i, j)]
    return total


@numba.njit(**JIT, inline="always")
def _age_gap(w, ages, i, j):
    """w's index for slots i and j: age_i - age_j clipped to ±D, plus D (slot i's age: ages[i - 1])."""
    D = (w.shape[0] - 1) // 2
    return min(max(ages[i - 1] - ages[j - 1], -D), D) + D


@numba.njit(**JIT, inline="always")
def _question_states(states, u, reads):
    """state_k = u^1 + o^k: the question and what hop k read."""
    for hop in range(states.shape[0]):
        for k in range(states.shape[1]):
            states[hop, k] = u[0, k] + reads[hop, k]


@numba.njit(**JIT, inline="always")
def _module(U, U_b, V, question, reads, pre, extra, first):
    """The answer module: pre[k] = U^T [u^1; o^k] + b for every hop (U of 2d rows), and its
    logits extra[r] = V^T relu(pre[r]) for r >= first."""
    K, d, hidden = reads.shape[0], reads.shape[1], V.shape[0]
    pre[0] = U_b
    for k in range(d):  # u^1's rows, the same for every hop: summed once, in the same order
        q_k, U_q = question[k], U[k]
        for j in range(hidden):
            pre[0, j] += q_k * U_q[j]
    for hop in range(1, K):
        pre[hop] = pre[0]
    for hop in range(K):  # then o^k's rows
        pre_hop = pre[hop]
        for k in range(d):
            o_k, U_o = reads[hop, k], U[d + k]
            for j in range(hidden):
                pre_hop[j] += o_k * U_o[j]
    extra[:] = 0.0
    for r in range(first, K):
        extra_r = extra[r]
        for j in range(hidden):
            if pre[r, j] > 0.0:
                h_j, V_j = pre[r, j], V[j]
                for a in range(extra_r.shape[0]):
                    extra_r[a] += h_j * V_j[a]


@numba.njit(**JIT, inline="always")
def _answer_rows(W, emb, answer_bag):
    """W (A, d) = answer_bag C^K: each answer class's row the sum of its words' rows of the last table."""
    Td, d = emb.shape[1], W.shape[1]
    W[:] = 0.0
    for a in range(answer_bag.shape[0]):
        for v in range(answer_bag.shape[1]):
            if answer_bag[a, v] != 0.0:
                for k in range(d):
                    W[a, k] += answer_bag[a, v] * emb[v, Td - d + k]


@numba.njit(**JIT, inline="always")
def _hop_logits(W, state, extra_r, logits):
    """A hop's answer logits W state + extra_r into logits; returns the first of their argmaxes
    (as torch's argmax)."""
    n_answers, d = W.shape
    best = 0
    for a in range(n_answers):
        logit = extra_r[a]
        for k in range(d):
            logit += W[a, k] * state[k]
        logits[a] = logit
        if logit > logits[best]:
            best = a
    return best


@numba.njit(**JIT, inline="always")
def _answer_probs(W, states, extra, probs, ce, target, first):
    """â_r = softmax(W state_r + extra_r) into probs[r], and its cross-entropy into ce[r], for
    r >= first (extra: the answer module's logits, or zeros)."""
    K, n_answers = states.shape[0], W.shape[0]
    ce[:] = 0.0
    for r in range(first, K):
        top = probs[r, _hop_logits(W, states[r], extra[r], probs[r])]
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
def _top_probability(logits, best):
    """max_a softmax(logits)_a, logits[best] being their largest."""
    norm = np.float32(0.0)
    for a in range(logits.shape[0]):
        norm += np.exp(logits[a] - logits[best])
    return np.float32(1.0) / norm


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


@numba.njit(**JIT)
def _seed_predict(params, answer_bag, words, coef, n_words, length, ages, flags, halt_threshold, halt_confidence, K, d):
    """One seed's answer class to each question and the hops it took (the forward pass of a
    training step, and the stopping rule at inference: past a hop whose answer's probability is
    under halt_confidence, to the next hop whose h_k passes the threshold)."""
    emb, temporal, halt_w, halt_b, H, log_penalty, U, U_b, V, rel, relq, own_b, mix = params
    linear, layerwise, masking, soft, null, readout, asked, stopping, right, last, offset, stick, mixed = flags
    N, M1, Td = words.shape[0], words.shape[1], emb.shape[1]
    e = ((np.arange(Td) % d + 1) / d).astype(np.float32)  # e_k = k/d, for each table's column k
    W = np.empty((answer_bag.shape[0], d), np.float32)
    _answer_rows(W, emb, answer_bag)
    B = own_b if offset else emb  # the question's own table B' of A^1 + B'
    x = np.empty((M1, Td), np.float32)
    tables = x.reshape((M1, Td // d, d))
    p, scores = np.empty((K, M1), np.float32), np.empty((K, M1), np.float32)
    attends, visited = np.empty((K, M1), np.bool_), np.empty((K, M1), np.bool_)
    u, reads = np.empty((K + 1, d), np.float32), np.empty((K, d), np.float32)
    penalty = np.exp(log_penalty[0])  # soft masking's e^x
    pointer = (rel, relq, np.zeros((K, rel.shape[1]), np.float32))  # with hop k's pointer weights
    attention = (stick, mixed, mix, np.zeros((2, K, M1) if mixed else (2, 1, 1), np.float32))
    states = reads if readout else np.empty((K, d), np.float32) if asked else u[1:]  # (K, d) what â_k reads
    pre, extra = np.zeros((K, V.shape[0]), np.float32), np.zeros((K, W.shape[0]), np.float32)  # the answer module's
    h, reach, pi = np.empty(K, np.float32), np.empty(K, np.float32), np.empty(K, np.float32)  # the halting unit's
    logits = np.empty(W.shape[0], np.float32)  # the answer logits of the hop the rule answers from
    answers, hops = np.empty(N, np.int64), np.empty(N, np.int64)
    for q in range(N):
        L = length[q]
        _embed(x, emb, B, temporal, words[q], coef[q], n_words[q], ages[q], L, d, e, offset)
        _hops(tables, u, reads, p, attends, visited, scores, H, penalty, pointer, ages[q], L, linear, layerwise,
              masking, soft, null, attention)
        if asked:
            _question_states(states, u, reads)
        r = K - 1
        if stopping:  # the first hop whose h_k = σ(w_h · state_k + b_h) passes the threshold
            _halting(halt_w, halt_b, states, h, reach, pi, stopping)
            r = _stop_hop(h, halt_threshold, 0)
        if V.shape[0]:
            _module(U, U_b, V, u[0], reads, pre, extra, r)
        best = _hop_logits(W, states[r], extra[r], logits)
        while halt_confidence > 0 and r < K - 1 and _top_probability(logits, best) < halt_confidence:
            r = _stop_hop(h, halt_threshold, r + 1)
            best = _hop_logits(W, states[r], extra[r], logits)
        hops[q], answers[q] = r + 1, best
    return answers, hops
