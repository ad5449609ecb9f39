"""Each part of a memory network (memnet/models/parts.py) alone, against a plain re-statement of
its contract on small hand-made tensors; then a whole MemN2N forward against the paper's
equations written out as loops."""
import math

import pytest
import torch

from memnet.config import MemN2NConfig
from memnet.data import Batch
from memnet.models.memn2n import MemN2N
from memnet.models.parts import AnswerHead, Attention, Halting, Masking, PointerInTime, Stopped, chosen


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def ce(logits, answer: int) -> float:
    """Cross-entropy of one answer's logits (a list of floats)."""
    return math.log(sum(math.exp(v) for v in logits)) - logits[answer]


SCORES = torch.tensor([[0.3, -1.2, 2.0, 0.5, 1.1],
                       [1.5, 0.2, -0.4, 0.9, -2.0],
                       [0.7, 0.1, 0.0, -0.3, 0.4]], dtype=torch.float64)  # (3, 5)
ALLOWED = torch.tensor([[True, True, False, True, False],  # slot 2: blocked; slot 4: padding
                        [True, True, True, True, True],
                        [False, False, False, False, False]])  # nothing to attend to


def softmax_by_hand(null: bool) -> torch.Tensor:
    p = torch.zeros_like(SCORES)
    for b in range(3):
        total = (1.0 if null else 0.0) + sum(math.exp(SCORES[b, i]) for i in range(5) if ALLOWED[b, i])
        for i in range(5):
            if ALLOWED[b, i]:
                p[b, i] = math.exp(SCORES[b, i]) / total
    return p


def stick_by_hand() -> torch.Tensor:
    p = torch.zeros_like(SCORES)
    for b in range(3):
        left = 1.0  # what the more recent memories left
        for i in range(5):
            if ALLOWED[b, i]:
                beta = sigmoid(float(SCORES[b, i]))
                p[b, i] = beta * left
                left *= 1 - beta
    return p


# --- Attention ---------------------------------------------------------------------------------

@pytest.mark.parametrize("null", [False, True])
def test_softmax_attention_with_and_without_the_null_memory(null):
    attention = Attention(MemN2NConfig(null_memory=null)).double()
    p = attention(SCORES, ALLOWED, hop=0)
    assert torch.allclose(p, softmax_by_hand(null), atol=1e-12)
    assert (p[~ALLOWED] == 0).all()  # padding and blocked memories: exactly 0
    sums = p[:2].sum(-1)
    if null:  # the null memory takes exp(0) / (1 + Σ exp(s_i)), reading nothing
        assert (sums < 1).all()
    else:
        assert torch.allclose(sums, torch.ones(2, dtype=torch.float64))
    assert not p.isnan().any()


def test_stick_breaking_gives_each_memory_its_share_of_what_the_more_recent_left():
    attention = Attention(MemN2NConfig(attention="stick")).double()
    assert attention.gate is None
    p = attention(SCORES, ALLOWED, hop=1)
    assert torch.allclose(p, stick_by_hand(), atol=1e-12)
    assert (p[~ALLOWED] == 0).all() and (p.sum(-1) < 1).all()
    assert not torch.allclose(p, softmax_by_hand(True), atol=1e-3)


@pytest.mark.parametrize("null", [False, True])
def test_mixed_attention_weighs_stick_and_softmax_by_each_hops_gate(null):
    attention = Attention(MemN2NConfig(attention="mixed", hops=3, stick_init=-1.0, null_memory=null)).double()
    assert attention.gate.shape == (3,)
    attention.reset_parameters()
    assert (attention.gate == -1.0).all()  # every g_k from stick_init
    with torch.no_grad():
        attention.gate.copy_(torch.tensor([1.5, -0.5, 0.0]))
    for hop, g in enumerate((1.5, -0.5, 0.0)):
        share = sigmoid(g)
        want = share * stick_by_hand() + (1 - share) * softmax_by_hand(null)
        p = attention(SCORES, ALLOWED, hop)
        assert torch.allclose(p, want, atol=1e-12)
        assert (p[~ALLOWED] == 0).all()


@pytest.mark.parametrize("null", [False, True])
def test_linear_start_gives_the_score_itself(null):
    attention = Attention(MemN2NConfig(null_memory=null)).double()
    p = attention(SCORES, ALLOWED, hop=0, linear=True)
    assert torch.equal(p, torch.where(ALLOWED, SCORES, torch.zeros_like(SCORES)))


# --- PointerInTime ----------------------------------------------------------------------------

TIME = torch.tensor([[0, 1, 2, 3, 4], [0, 2, 5, 6, 9]])  # (2, 5) ages; the second as noise spaces them
BEFORE = torch.tensor([[0.5, 0.2, 0.1, 0.15, 0.05], [0.0, 0.7, 0.0, 0.3, 0.0]], dtype=torch.float64)  # p^{k-1}


def pointer_by_hand(w, time, before, span):
    """(B, M): Σ_j p_j w[clip(age_i - age_j, -D, D) + D], w (B, 2D+1) or (2D+1,)."""
    B, M = before.shape
    bias = torch.zeros(B, M, dtype=torch.float64)
    for b in range(B):
        row = w if w.dim() == 1 else w[b]
        for i in range(M):
            for j in range(M):
                gap = min(max(int(time[b, i]) - int(time[b, j]), -span), span)
                bias[b, i] += before[b, j] * row[gap + span]
    return bias


def test_the_pointer_adds_the_weight_of_each_age_difference_from_the_last_read():
    pointer = PointerInTime(MemN2NConfig(relative_time=2, hops=3, dim=4)).double()
    assert pointer.w.shape == (2, 5) and pointer.r is None and (pointer.w == 0).all()
    offsets = pointer.offsets(TIME)
    for b in range(2):
        for i in range(5):
            for j in range(5):
                assert offsets[b, i, j] == min(max(int(TIME[b, i] - TIME[b, j]), -2), 2) + 2
    with torch.no_grad():
        pointer.w.copy_(torch.randn(2, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    u = torch.randn(2, 4, dtype=torch.float64)
    for hop in (1, 2):  # hop k uses w^k, row k - 2
        bias = pointer(u, BEFORE, offsets, hop)
        assert torch.allclose(bias, pointer_by_hand(pointer.w[hop - 1], TIME, BEFORE, 2), atol=1e-12)
    assert not torch.allclose(pointer(u, BEFORE, offsets, 1), pointer(u, BEFORE, offsets, 2))
    pointer.reset_parameters()
    assert (pointer.w == 0).all() and (pointer(u, BEFORE, offsets, 1) == 0).all()


def test_the_pointers_weights_read_the_hops_state_with_relative_query():
    D, d = 3, 4
    pointer = PointerInTime(MemN2NConfig(relative_time=D, relative_query=True, hops=3, dim=d)).double()
    assert pointer.r.shape == (2, 2 * D + 1, d) and (pointer.r == 0).all()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        pointer.w.copy_(torch.randn(2, 2 * D + 1, generator=g, dtype=torch.float64))
        pointer.r.copy_(torch.randn(2, 2 * D + 1, d, generator=g, dtype=torch.float64))
    u = torch.randn(2, d, generator=g, dtype=torch.float64)
    offsets = pointer.offsets(TIME)
    for hop in (1, 2):
        w = torch.zeros(2, 2 * D + 1, dtype=torch.float64)  # w^k + r^k u^k, per question
        for b in range(2):
            for gap in range(2 * D + 1):
                w[b, gap] = pointer.w[hop - 1, gap] + sum(pointer.r[hop - 1, gap, e] * u[b, e] for e in range(d))
        assert torch.allclose(pointer(u, BEFORE, offsets, hop), pointer_by_hand(w, TIME, BEFORE, D), atol=1e-12)
    pointer.reset_parameters()
    assert (pointer.r == 0).all() and (pointer.w == 0).all()


# --- Masking ----------------------------------------------------------------------------------

REAL = torch.tensor([[True, True, True, False], [True, True, True, True]])
VISITED = torch.tensor([[False, True, False, False], [True, False, False, True]])


def test_hard_masking_blocks_the_chosen_memories_at_every_hop():
    masking = Masking(MemN2NConfig(masking="hard"))
    assert masking.log_penalty is None and masking.penalty(VISITED) == 0.0
    for hop in range(3):
        assert torch.equal(masking.allowed(REAL, VISITED, hop), REAL & ~VISITED)


def test_off_masking_blocks_and_lowers_nothing_and_remembers_nothing():
    masking = Masking(MemN2NConfig(masking="off"))
    for hop in range(3):
        assert torch.equal(masking.allowed(REAL, VISITED, hop), REAL)
    p = torch.tensor([[0.1, 0.6, 0.3, 0.0], [0.5, 0.2, 0.2, 0.1]])
    assert torch.equal(masking.visit(VISITED, p, REAL), VISITED) and masking.penalty(VISITED) == 0.0


def test_second_masking_blocks_at_hop_2_alone_and_lowers_later():
    masking = Masking(MemN2NConfig(masking="second", mask_init=0.7))
    masking.reset_parameters()
    assert torch.equal(masking.allowed(REAL, VISITED, 1), REAL & ~VISITED)  # hop 2 (0-based 1)
    assert torch.equal(masking.allowed(REAL, VISITED, 0), REAL)
    assert torch.equal(masking.allowed(REAL, VISITED, 2), REAL)  # hop 3 may return, lowered
    assert torch.allclose(masking.penalty(VISITED), math.exp(0.7) * VISITED.float())


@pytest.mark.parametrize("x", [0.0, -3.0, 1.25])
def test_soft_masking_lowers_a_visited_memorys_score_by_exactly_e_to_the_x(x):
    masking = Masking(MemN2NConfig(masking="soft", mask_init=x)).double()
    masking.reset_parameters()
    assert masking.log_penalty.item() == x
    for hop in range(3):
        assert torch.equal(masking.allowed(REAL, VISITED, hop), REAL)
    score = torch.tensor([[0.2, 1.0, -0.5, 0.0], [0.3, 0.3, 0.3, 0.3]], dtype=torch.float64)
    lowered = score - masking.penalty(VISITED)
    for b in range(2):
        for i in range(4):
            want = score[b, i] - (math.exp(x) if VISITED[b, i] else 0.0)
            assert lowered[b, i].item() == pytest.approx(float(want), abs=1e-12)
    (score - masking.penalty(VISITED)).sum().backward()
    assert masking.log_penalty.grad.item() == pytest.approx(-math.exp(x) * 3)  # three visited memories


def test_chosen_is_the_first_argmax_and_never_a_row_of_zeros():
    p = torch.tensor([[0.2, 0.4, 0.4, 0.0],  # a tie: the first
                      [0.0, 0.0, 0.0, 0.0],  # nothing read: nothing chosen
                      [0.9, 0.05, 0.0, 0.05]])
    assert chosen(p).tolist() == [[False, True, False, False], [False] * 4, [True, False, False, False]]
    masking = Masking(MemN2NConfig(masking="hard"))
    visited = torch.tensor([[False, False, False, True], [True, False, False, False], [False, False, True, False]])
    real = torch.tensor([[True] * 4, [True] * 4, [False, True, True, True]])  # row 3's choice is padding
    assert masking.visit(visited, p, real).tolist() == [[False, True, False, True], [True, False, False, False],
                                                        [False, False, True, False]]


# --- AnswerHead -------------------------------------------------------------------------------

def test_the_answer_state_is_what_answer_from_names():
    q, o, u = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    assert torch.equal(AnswerHead(MemN2NConfig(answer_from="state"), 2).state(q, o, u), u)
    assert torch.equal(AnswerHead(MemN2NConfig(answer_from="readout"), 2).state(q, o, u), o)
    assert torch.equal(AnswerHead(MemN2NConfig(answer_from="question"), 2).state(q, o, u), q + o)


def test_the_answer_module_starts_silent():
    head = AnswerHead(MemN2NConfig(dim=3, answer_hidden=4), 2)
    assert head.U.shape == (6, 4) and head.b.shape == (4,) and head.V.shape == (4, 2)
    with torch.no_grad():
        head.b.fill_(1.0), head.V.fill_(1.0)
    head.reset_parameters(lambda *shape: torch.full(shape, 0.7))
    assert (head.U == 0.7).all() and (head.b == 0).all() and (head.V == 0).all()
    states, W = torch.randn(2, 3, 3), torch.randn(2, 3)
    assert torch.equal(head(states, W, torch.randn(2, 3), torch.randn(2, 3, 3)), states @ W.T)


def test_the_answer_logits_are_w_s_plus_the_modules():
    d, H, A, B, K = 3, 4, 2, 2, 3
    g = torch.Generator().manual_seed(2)
    head = AnswerHead(MemN2NConfig(dim=d, answer_hidden=H), A).double()
    with torch.no_grad():
        for param in (head.U, head.b, head.V):
            param.copy_(torch.randn(param.shape, generator=g, dtype=torch.float64))
    states, W = torch.randn(B, K, d, generator=g, dtype=torch.float64), torch.randn(A, d, generator=g, dtype=torch.float64)
    question, reads = torch.randn(B, d, generator=g, dtype=torch.float64), torch.randn(B, K, d, generator=g, dtype=torch.float64)
    logits = head(states, W, question, reads)
    U, bias, Vw = head.U.detach(), head.b.detach(), head.V.detach()
    active = 0
    for b in range(B):
        for k in range(K):
            x = question[b].tolist() + reads[b, k].tolist()  # [u^1; o^k]
            hidden = [max(0.0, sum(x[i] * float(U[i, h]) for i in range(2 * d)) + float(bias[h])) for h in range(H)]
            active += sum(v > 0 for v in hidden)
            for a in range(A):
                want = sum(float(states[b, k, e] * W[a, e]) for e in range(d)) + sum(hidden[h] * float(Vw[h, a])
                                                                                   for h in range(H))
                assert logits[b, k, a].item() == pytest.approx(want, abs=1e-10)
    assert 0 < active < B * K * H  # the ReLU both passes and cuts
    plain = AnswerHead(MemN2NConfig(dim=d), A)
    assert plain.U is None and plain.V is None
    assert torch.equal(plain(states, W, question, reads), states @ W.T)


# --- Halting ----------------------------------------------------------------------------------

H_RAW = [[0.7, 0.2, 0.1],  # stops after hop 1 (halted)
         [0.3, 0.6, 0.9],  # after hop 2 (halted)
         [0.1, 0.2, 0.3],  # runs to hop 3 (not halted)
         [0.2, 0.4, 0.8]]  # runs to hop 3, whose unit says stop (halted)


def halting_case(**kw):
    """A halting unit on 2-d states whose first dimension is the logit of H_RAW (w = [1, 0], b = 0)."""
    halting = Halting(MemN2NConfig(stopping=True, hops=3, dim=2, **kw)).double()
    with torch.no_grad():
        halting.w.copy_(torch.tensor([1.0, 0.0])), halting.b.zero_()
    states = torch.zeros(4, 3, 2, dtype=torch.float64)
    states[..., 0] = torch.tensor(H_RAW, dtype=torch.float64).logit()
    states[..., 1] = torch.randn(4, 3, dtype=torch.float64)  # read by nothing (w_2 = 0)
    hop_logits = torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    return halting, states, hop_logits


def test_halting_distribution_and_where_it_stops():
    halting, states, hop_logits = halting_case()
    attention = torch.rand(4, 3, 6, dtype=torch.float64) + 0.1
    s = halting(states, hop_logits, attention)
    for b, h in enumerate(H_RAW):
        h = h[:2] + [1.0]  # h_K = 1
        want = [h[0], (1 - h[0]) * h[1], (1 - h[0]) * (1 - h[1]) * h[2]]  # π_k = h_k Π_{j<k} (1 - h_j)
        assert s.halt_probs[b].tolist() == pytest.approx(want, abs=1e-12)
    assert torch.allclose(s.halt_probs.sum(-1), torch.ones(4, dtype=torch.float64))
    assert s.hops_used.tolist() == [1, 2, 3, 3] and s.halted.tolist() == [True, True, False, True]
    assert s.stops.tolist() == [[True, False, True], [False, True, True], [False, False, True], [False, False, True]]
    for b, k in enumerate(s.hops_used.tolist()):
        assert torch.equal(s.logits[b], hop_logits[b, k - 1])
        assert torch.equal(s.attention[b, :k], attention[b, :k]) and (s.attention[b, k:] == 0).all()
    assert torch.equal(halting(states, hop_logits, attention, every_hop=True).attention, attention)
    halting.threshold = 0.65  # question 2's hop 2 (0.6) no longer stops it
    assert halting(states, hop_logits, attention).hops_used.tolist() == [1, 3, 3, 3]


def test_halt_confidence_applies_at_inference_only():
    halting, states, _ = halting_case(halt_confidence=0.9)
    hop_logits = torch.zeros(4, 3, 2, dtype=torch.float64)  # every answer 50:50 ...
    hop_logits[1, 1, 0] = 5.0  # ... but question 2's at hop 2: σ(5) = 0.993 sure
    attention = torch.ones(4, 3, 3, dtype=torch.float64)
    assert halting.training and halting(states, hop_logits, attention).hops_used.tolist() == [1, 2, 3, 3]
    halting.eval()
    s = halting(states, hop_logits, attention)
    assert s.hops_used.tolist() == [3, 2, 3, 3]  # question 1 goes past its unsure hop 1
    assert s.halted.tolist() == [False, True, False, True]


def test_without_stopping_every_question_takes_every_hop():
    halting = Halting(MemN2NConfig(stopping=False, hops=3, dim=2))
    assert halting.w is None and halting.b is None
    states, hop_logits, attention = torch.randn(4, 3, 2), torch.randn(4, 3, 5), torch.rand(4, 3, 6)
    s = halting(states, hop_logits, attention)
    assert s.hops_used.tolist() == [3] * 4 and not s.halted.any() and s.stops is None
    assert torch.equal(s.logits, hop_logits[:, -1]) and torch.equal(s.attention, attention)
    assert s.halt_probs.tolist() == [[0.0, 0.0, 1.0]] * 4


def test_the_halting_unit_starts_at_halt_init():
    halting = Halting(MemN2NConfig(stopping=True, dim=3, halt_init=-4.0))
    halting.reset_parameters(lambda n: torch.full((n,), 0.25))
    assert (halting.w == 0.25).all() and halting.b.item() == -4.0


ANSWER = torch.tensor([0, 3, -1, 2])  # question 3 has no answer


def test_the_expected_loss_is_the_expected_answer_loss_plus_the_hops_cost():
    halting, states, hop_logits = halting_case(halt_training="expected", halt_cost=0.05)
    s = halting(states, hop_logits, torch.ones(4, 3, 2, dtype=torch.float64))
    answer = torch.tensor([0, 3, 1, 2])
    want = 0.0
    for b in range(4):
        for k in range(3):  # Σ_k π_k (CE(â_k) + cost (k - 1)), k from 1
            want += s.halt_probs[b, k].item() * (ce(hop_logits[b, k].tolist(), int(answer[b])) + 0.05 * k)
    assert halting.loss(answer, states, hop_logits, s, None).item() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("rule", [
    "right", "right_last"])
def test_a_question_without_an_answer_adds_nothing_to_the_loss(rule):
    # (the expected rule still charges such a question its hop cost: tests/test_model_numpy.py)
    halting, states, hop_logits = halting_case(halt_training=rule, halt_cost=0.05)
    s = halting(states, hop_logits, torch.ones(4, 3, 2, dtype=torch.float64))
    apart = hop_logits + 1.0 if rule == "right_last" else None
    keep = ANSWER >= 0
    alone = Stopped(*(t[keep] for t in s))
    whole = halting.loss(ANSWER, states, hop_logits, s, apart)
    answered = halting.loss(ANSWER[keep], states[keep], hop_logits[keep], alone, None if apart is None else apart[keep])
    assert whole.item() == pytest.approx(answered.item(), rel=1e-6)


def right_loss_by_hand(halting, states, hop_logits, hops_used, early, early_hop1, apart=None):
    """Σ_k weight_k CE(â_k) + Σ_{k<K} BCE(h_k, [argmax â_k = answer]), weight 1 at the hop answered
    from (and, given `apart`, the last hop, the others' CE from apart), early / early_hop1 else."""
    total = 0.0
    for b in range(4):
        a = int(ANSWER[b])
        if a < 0:
            continue
        for k in range(3):
            given = k == hops_used[b] - 1 or (apart is not None and k == 2)
            logits = hop_logits if given or apart is None else apart
            weight = 1.0 if given else early_hop1 if k == 0 else early
            total += weight * ce(logits[b, k].tolist(), a)
        for k in range(2):
            h = sigmoid(sum(states[b, k, e].item() * halting.w[e].item() for e in range(2)) + halting.b.item())
            right = int(hop_logits[b, k].argmax()) == a
            total += -math.log(h if right else 1 - h)
    return total


def test_the_right_loss():
    halting, states, hop_logits = halting_case(halt_training="right", early_answers=0.3, early_answers_hop1=0.1)
    hop_logits[1, 0, 3] = 9.0  # question 2's hop 1 answers right
    s = halting(states, hop_logits, torch.ones(4, 3, 2, dtype=torch.float64))
    want = right_loss_by_hand(halting, states, hop_logits, s.hops_used.tolist(), 0.3, 0.1)
    # rel 1e-6: the BCE's targets are float32 (Halting.right), so a float64 loss comes back float32
    assert halting.loss(ANSWER, states, hop_logits, s, None).item() == pytest.approx(want, rel=1e-6)
    same = Halting(MemN2NConfig(stopping=True, hops=3, dim=2, halt_training="right", early_answers=0.3)).double()
    same.load_state_dict(halting.state_dict())  # early_answers_hop1 -1: hop 1 at early_answers too
    want = right_loss_by_hand(halting, states, hop_logits, s.hops_used.tolist(), 0.3, 0.3)
    assert same.loss(ANSWER, states, hop_logits, s, None).item() == pytest.approx(want, rel=1e-6)
    states.requires_grad_()
    bce = halting.right(ANSWER, states, hop_logits)
    grad, w_grad = torch.autograd.grad(bce, [states, halting.w], allow_unused=True)
    assert grad is None and w_grad.abs().sum() > 0  # the halting unit's BCE trains it and steers no state


def test_the_right_last_loss():
    halting, states, hop_logits = halting_case(halt_training="right_last", early_answers=0.3, early_answers_hop1=0.1)
    apart = torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    s = halting(states, hop_logits, torch.ones(4, 3, 2, dtype=torch.float64))
    want = right_loss_by_hand(halting, states, hop_logits, s.hops_used.tolist(), 0.3, 0.1, apart)
    assert halting.loss(ANSWER, states, hop_logits, s, apart).item() == pytest.approx(want, rel=1e-6)


# --- the whole model against the paper's equations ---------------------------------------------

def test_a_memory_networks_forward_is_the_papers_equations():
    """MemN2N (adjacent tying, position encoding, temporal encoding, the null memory, soft
    masking, the stopping rule with the expected loss) against the equations of
    memnet/models/memn2n.py's docstring, written out as loops over questions, hops, memories,
    words and dimensions."""
    V, d, K, T = 12, 4, 3, 6
    cfg = MemN2NConfig(dim=d, hops=K, stopping=True, masking="soft", mask_init=0.5, halt_training="expected",
                       halt_cost=0.05)
    answer_words = [[3], [4, 5], [9]]
    model = MemN2N(cfg, vocab_size=V, answer_words=answer_words, memory_size=T).double()
    model.reset_parameters(torch.Generator().manual_seed(7), std=0.5)
    with torch.no_grad():
        model.halting.w.mul_(6.0)
        model.halting.b.fill_(-0.5)
    story = torch.tensor([[[2, 3, 0], [4, 5, 6], [7, 0, 0], [0, 0, 0]],
                          [[8, 9, 10], [2, 11, 0], [3, 3, 4], [5, 6, 0]],
                          [[6, 7, 8], [9, 2, 0], [0, 0, 0], [0, 0, 0]],
                          [[10, 11, 2], [3, 7, 0], [4, 4, 0], [0, 0, 0]]])  # (4, M 4, J 3)
    query = torch.tensor([[2, 5, 0], [8, 9, 11], [4, 0, 0], [7, 3, 10]])
    length = torch.tensor([3, 4, 2, 3])
    time = torch.tensor([[0, 1, 3, 0], [0, 2, 3, 7], [1, 2, 0, 0], [0, 4, 9, 0]])  # 7, 9: past T - 1, T(5)
    answer = torch.tensor([0, 1, 2, 1])
    B, M = 4, 4
    batch = Batch(story, query, length, answer, torch.full((B, 1), -1), torch.ones(B, dtype=torch.long),
                  torch.zeros(B, dtype=torch.long), time)
    model.eval()
    r = model(batch)
    tol = 1e-6  # the position encoding's j/J is computed in float32 (MemN2N.weights), even in a float64 model

    tables, temporal = model.tables.detach(), model.temporal.detach()  # [A^1 = B, C^1 = A^2, ..., C^K = W^T]
    w_h, b_h, penalty = model.halting.w.detach(), model.halting.b.item(), math.exp(0.5)

    def encode(words, table, age=None):  # Σ_j l_kj E x_j (+ T(i)), l_kj = (1 - j/J) - (k/d)(1 - 2j/J)
        n = sum(1 for x in words if x != 0)
        out = [0.0] * d
        for j, x in enumerate(words, 1):
            if x == 0:
                continue
            for k in range(1, d + 1):
                out[k - 1] += ((1 - j / n) - (k / d) * (1 - 2 * j / n)) * float(tables[table, x, k - 1])
        if age is not None:
            out = [out[e] + float(temporal[table, min(age, T - 1), e]) for e in range(d)]
        return out

    W = [[sum(float(tables[K, x, e]) for x in words) for e in range(d)] for words in answer_words]  # W = rows of C^K
    used, batch_loss = [], 0.0
    for b in range(B):
        n = int(length[b])
        u = encode(query[b].tolist(), 0)  # u^1 = B q, B = A^1
        visited, ps, hop_logits, h_raw = set(), [], [], []
        for k in range(K):  # hop k + 1: A = table k, C = table k + 1
            m = [encode(story[b, i].tolist(), k, int(time[b, i])) for i in range(n)]
            c = [encode(story[b, i].tolist(), k + 1, int(time[b, i])) for i in range(n)]
            s = [sum(u[e] * m[i][e] for e in range(d)) - (penalty if i in visited else 0.0) for i in range(n)]
            z = 1.0 + sum(math.exp(v) for v in s)  # the null memory: exp(0)
            p = [math.exp(v) / z for v in s]
            o = [sum(p[i] * c[i][e] for i in range(n)) for e in range(d)]
            u = [u[e] + o[e] for e in range(d)]  # u^{k+1}
            visited.add(max(range(n), key=lambda i: (p[i], -i)))  # the first argmax
            ps.append(p + [0.0] * (M - n))
            hop_logits.append([sum(W[a][e] * u[e] for e in range(d)) for a in range(len(W))])  # W u^{k+1}
            h_raw.append(sigmoid(sum(float(w_h[e]) * u[e] for e in range(d)) + b_h))
        h = h_raw[:-1] + [1.0]
        go_on, pi = 1.0, []
        for k in range(K):
            pi.append(go_on * h[k])
            go_on *= 1 - h[k]
        stop = next((k for k in range(K - 1) if h_raw[k] > 0.5), K - 1)  # 0-based
        used.append(stop + 1)
        assert r.hops_used[b].item() == stop + 1
        assert r.halted[b].item() == (h_raw[stop] > 0.5)
        assert r.hop_logits[b].tolist() == [pytest.approx(row, abs=tol) for row in hop_logits]
        assert r.logits[b].tolist() == pytest.approx(hop_logits[stop], abs=tol)
        assert r.halt_probs[b].tolist() == pytest.approx(pi, abs=tol)
        for k in range(K):
            assert r.attention[b, k].tolist() == pytest.approx(ps[k] if k <= stop else [0.0] * M, abs=tol)
            assert (r.attention[b, k, n:] == 0).all() and (k <= stop or (r.attention[b, k] == 0).all())
        expected = sum(pi[k] * (ce(hop_logits[k], int(answer[b])) + 0.05 * k) for k in range(K))
        batch_loss += expected
    assert r.loss.item() == pytest.approx(batch_loss, rel=tol)
    assert len(set(used)) > 1  # the stopping rule stops questions at different hops
