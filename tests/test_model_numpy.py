"""The reference model's forward pass against an independent NumPy re-statement of the paper's
equations (the docstring of memnet/models/memn2n.py), on a 2-sentence, 2-hop example, for each
switch. The NumPy code below never calls the model's helpers: it reads the weights and redoes
the arithmetic one question, one hop, one memory at a time."""
import numpy as np
import pytest
import torch

from memnet.config import load
from memnet.data import Batch
from memnet.models import MemN2N

V, D, M, K = 8, 4, 3, 2  # vocabulary, embedding size, memory slots (2 sentences + 1 padding), hops
ANSWERS = [[5], [6], [6, 7], [7, 7]]  # answer classes as word ids: two-word phrases, one a word twice


def example() -> Batch:
    """Two questions over two sentences each (the third memory slot is padding): a one-word
    sentence, a memory older than the temporal table (age 5 of 3: it reads the last row), three
    supporting facts of which two hops can look for two, and a question without any."""
    story = torch.tensor([[[1, 2, 3, 0], [4, 0, 0, 0], [0, 0, 0, 0]],
                          [[2, 5, 0, 0], [3, 3, 6, 7], [0, 0, 0, 0]]])  # (2, 3, 4)
    return Batch(story=story, query=torch.tensor([[1, 4, 0], [7, 2, 3]]), length=torch.tensor([2, 2]),
                 answer=torch.tensor([0, 2]), support=torch.tensor([[1, 0, 1], [-1, -1, -1]]),
                 n_support=torch.tensor([3, 0]), task=torch.tensor([1, 1]), time=torch.tensor([[1, 5, 2], [2, 0, 0]]))


def model(hops: int = K, attention_supervision: float = 0.0, **switches) -> MemN2N:
    cfg = load(None, {"model.dim": D, "model.hops": hops, **{f"model.{k}": v for k, v in switches.items()}})
    m = MemN2N(cfg.model, vocab_size=V, answer_words=ANSWERS, memory_size=M, attention_supervision=attention_supervision)
    m.reset_parameters(torch.Generator().manual_seed(3), std=0.6)  # large weights: peaked attention
    m.eval()
    return m


def weights(m: MemN2N) -> dict[str, np.ndarray]:
    return {name: p.detach().double().numpy() for name, p in m.named_parameters()}


def sentence(words, E: np.ndarray, encoding: str) -> np.ndarray:
    """Σ_j l_j · E x_j over the sentence's J real words; l_kj = (1 - j/J) - (k/d)(1 - 2j/J)."""
    real = [w for w in words if w != 0]
    J, out = len(real), np.zeros(D)
    for j, w in enumerate(real, start=1):
        if encoding == "pe":
            l = np.array([(1 - j / J) - (k / D) * (1 - 2 * j / J) for k in range(1, D + 1)])
        else:
            l = np.ones(D)
        out += l * E[w]
    return out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def reference(m: MemN2N, batch: Batch, temporal: bool = True) -> list[dict]:
    """Per question: attention per hop (K, M), hop logits (K, A), halting h and π, hops used,
    logits, loss. The tables: adjacent [A^1 = B, C^1 = A^2, ..., C^K = W^T]; layer-wise [B, A, C, W^T]."""
    w, K = weights(m), m.hops
    tables, T = w["tables"], (w["temporal"] if temporal else None)
    adjacent = m.tying == "adjacent"
    B_, A_, C_ = (0, None, None) if adjacent else (0, 1, 2)
    # (A, d) W of hop k: the answer words' rows of C^K (W^T)
    W = [np.array([sum(tables[K if adjacent else 3][x] for x in words) for words in ANSWERS]) for k in range(K)]
    out = []
    for b in range(len(batch)):
        story, n = batch.story[b].tolist(), int(batch.length[b])
        ages = [min(a, M - 1) for a in batch.time[b].tolist()]  # older than the table: its last row
        u = sentence(batch.query[b].tolist(), tables[B_], m.encoding)  # u^1
        question = u
        visited, attention, states, hop_scores = set(), [], [], []
        for k in range(K):
            a_t, c_t = (k, k + 1) if adjacent else (A_, C_)  # A^{k+1} = C^k when adjacent
            mem = [sentence(story[i], tables[a_t], m.encoding) + (T[a_t][ages[i]] if T is not None else 0) for i in range(n)]
            out_mem = [sentence(story[i], tables[c_t], m.encoding) + (T[c_t][ages[i]] if T is not None else 0) for i in range(n)]
            scores = np.array([u @ mi for mi in mem])
            if m.cfg.masking == "soft":
                scores = scores - np.exp(w["masking.log_penalty"][0]) * np.array([i in visited for i in range(n)])
            allowed = [i for i in range(n) if not (m.cfg.masking == "hard" and i in visited)]
            hop_scores.append({i: scores[i] for i in allowed})
            p = np.zeros(M)  # nothing allowed (every memory masked): all 0
            if not allowed:
                pass
            elif m.linear:
                p[allowed] = scores[allowed]
            elif m.cfg.null_memory:
                p[allowed] = softmax(np.concatenate([[0.0], scores[allowed]]))[1:]
            else:
                p[allowed] = softmax(scores[allowed])
            o = sum(p[i] * out_mem[i] for i in range(n))
            u_next = (w["H"] @ u if not adjacent else u) + o
            if m.cfg.masking != "off" and p.max() > 0:
                visited.add(int(p.argmax()))
            attention.append(p)
            states.append({"readout": o, "question": question + o}.get(m.cfg.answer_from, u_next))
            u = u_next
        hop_logits = np.array([W[k] @ s for k, s in enumerate(states)])  # (K, A)
        q = {"attention": np.array(attention), "hop_logits": hop_logits, "hops_used": K, "halted": False,
             "halt_probs": np.eye(K)[K - 1]}
        if m.cfg.stopping:
            h = [1 / (1 + np.exp(-(w["halting.w"] @ s + w["halting.b"][0]))) for s in states]
            h_last_forced = h[:-1] + [1.0]
            q["halt_probs"] = np.array([h_last_forced[k] * np.prod([1 - h_last_forced[j] for j in range(k)])
                                        for k in range(K)])
            q["hops_used"] = next((k + 1 for k in range(K) if h[k] > m.cfg.halt_threshold), K)
            q["halted"] = bool(h[q["hops_used"] - 1] > m.cfg.halt_threshold)
            q["attention"][q["hops_used"]:] = 0
        q["logits"] = hop_logits[q["hops_used"] - 1]
        q["loss"] = loss(m, q, hop_scores, int(batch.answer[b]), batch.support[b].tolist(), int(batch.n_support[b]))
        out.append(q)
    return out


def cross_entropy(logits: np.ndarray, target: int) -> float:
    return float(np.log(np.exp(logits - logits.max()).sum()) + logits.max() - logits[target])


def loss(m: MemN2N, q: dict, hop_scores: list, answer: int, support: list, n_support: int) -> float:
    """One question's loss: CE of the answer (without stopping), or Σ_k π_k (CE(â_k) + halt_cost
    (k - 1)) (with it); plus attention_supervision times Σ_k CE(hop k's scores, its k-th fact)
    over the facts hop k may attend to, and -log π at the number of facts (with stopping)."""
    K = m.hops
    if m.cfg.stopping:
        total = sum(q["halt_probs"][k] * (cross_entropy(q["hop_logits"][k], answer) + m.cfg.halt_cost * k) for k in range(K))
    else:
        total = cross_entropy(q["logits"], answer)
    if m.supervision > 0:
        extra = 0.0
        for k, fact in enumerate(support[:K]):
            if fact >= 0 and fact in hop_scores[k]:
                slots = sorted(hop_scores[k])
                extra += cross_entropy(np.array([hop_scores[k][i] for i in slots]), slots.index(fact))
        if m.cfg.stopping:
            extra -= np.log(max(q["halt_probs"][min(max(n_support, 1), K) - 1], 1e-8))
        total += m.supervision * extra
    return total


SWITCHES = {
    "pe, temporal, adjacent, null memory": {},
    "bag of words": {"encoding": "bow"},
    "no temporal encoding": {"temporal": False},
    "layer-wise tying": {"tying": "layerwise"},
    "no null memory": {"null_memory": False},
    "hard masking": {"masking": "hard"},
    "soft masking": {"masking": "soft"},
    "answer from the read-out": {"answer_from": "readout"},
    "stopping": {"stopping": True},
    "stopping from the read-out": {"stopping": True, "answer_from": "readout"},
    "answer from the question and the read-out": {"answer_from": "question"},
    "stopping from the question and the read-out, hard masking": {"stopping": True, "answer_from": "question",
                                                                  "masking": "hard"},
    "bow, layer-wise, hard masking, no null memory": {"encoding": "bow", "tying": "layerwise", "masking": "hard",
                                                     "null_memory": False},
    "attention supervision": {"attention_supervision": 0.7},
    "attention supervision, hard masking, stopping": {"attention_supervision": 0.7, "masking": "hard", "stopping": True,
                                                      "halt_cost": 0.3},
}


@pytest.mark.parametrize("hops", [2, 3])
@pytest.mark.parametrize("switches", SWITCHES.values(), ids=SWITCHES.keys())
def test_forward_matches_the_equations(switches, hops):
    m = model(hops, **switches)
    if m.cfg.masking == "soft":
        with torch.no_grad():
            m.masking.log_penalty.fill_(0.7)  # a penalty of e^0.7, not the starting e^0 = 1
    batch = example()
    with torch.no_grad():
        got = m(batch)
    want_all = reference(m, batch, temporal=switches.get("temporal", True))
    for b, want in enumerate(want_all):
        assert got.attention[b].double().numpy() == pytest.approx(want["attention"], abs=1e-5)
        assert got.hop_logits[b].double().numpy() == pytest.approx(want["hop_logits"], abs=1e-4)
        assert got.logits[b].double().numpy() == pytest.approx(want["logits"], abs=1e-4)
        assert got.halt_probs[b].double().numpy() == pytest.approx(want["halt_probs"], abs=1e-5)
        assert int(got.hops_used[b]) == want["hops_used"]
        assert bool(got.halted[b]) == want["halted"]
    assert float(got.attention[:, :, 2].abs().sum()) == 0.0  # the padding slot is never read
    assert float(got.loss) == pytest.approx(sum(q["loss"] for q in want_all), rel=1e-5)  # summed
    assert got.halted.dtype == torch.bool and got.hops_used.shape == (2,)


def test_linear_start_has_no_softmax():
    m = model()
    m.linear = True
    batch = example()
    with torch.no_grad():
        got = m(batch)
    for b, want in enumerate(reference(m, batch)):
        assert got.attention[b].double().numpy() == pytest.approx(want["attention"], abs=1e-5)
        assert got.logits[b].double().numpy() == pytest.approx(want["logits"], abs=1e-4)
    assert not torch.allclose(got.attention.sum(-1), torch.ones(2, K))  # raw scores, not a distribution


def test_hard_masking_moves_the_second_hop_off_the_first_hops_choice():
    m, batch = model(masking="hard"), example()
    with torch.no_grad():
        got, free = m(batch), model()(batch)
    first = got.attention[:, 0].argmax(-1)
    assert torch.all(got.attention[torch.arange(2), 1, first] == 0)  # exactly 0, not small
    assert torch.equal(got.attention[:, 0], free.attention[:, 0])  # hop 1 is untouched by masking


def test_the_stopping_rule_halts_where_the_halting_unit_passes_the_threshold():
    """Set the halting bias between the two questions' w·u^2, so that one stops after hop 1
    and the other goes on: the example then shows both outcomes, each against the equations."""
    m, batch = model(stopping=True), example()
    with torch.no_grad():
        base = m(batch)
        # h_1 = σ(w·u^2 + b): put b between the two questions' w·u^2
        wu = torch.logit(base.halt_probs[:, 0].double()) - float(m.halting.b)  # (2,) w·u^2
        lo, hi = sorted(wu.tolist())
        m.halting.b.fill_(-(lo + hi) / 2)
        got = m(batch)
    want = reference(m, batch)
    assert sorted(int(h) for h in got.hops_used) == [1, 2]
    for b in range(2):
        assert int(got.hops_used[b]) == want[b]["hops_used"]
        assert bool(got.halted[b]) == want[b]["halted"] == (want[b]["hops_used"] == 1)
        assert got.halt_probs[b].double().numpy() == pytest.approx(want[b]["halt_probs"], abs=1e-5)
        assert got.logits[b].double().numpy() == pytest.approx(want[b]["logits"], abs=1e-4)
        assert got.attention[b].double().numpy() == pytest.approx(want[b]["attention"], abs=1e-5)
    stopped = int(got.hops_used.argmin())
    assert float(got.attention[stopped, 1].abs().sum()) == 0.0  # the hop not taken reads nothing
    assert float(got.halt_probs.sum(-1).sub(1).abs().max()) < 1e-6  # π is a distribution


@pytest.mark.parametrize("stopping", [False, True])
def test_a_question_without_an_answer_adds_no_answer_loss(stopping):
    m, batch = model(stopping=stopping, attention_supervision=0.5), example()
    with torch.no_grad():
        alone = float(m(batch.index(slice(0, 1))).loss)
        batch.answer = torch.tensor([0, -1])  # question 2 has no answer (and no facts)
        out = m(batch)
    # with stopping, question 2 still pays its expected hop cost and -log π at one hop
    pi = out.halt_probs[1].double()
    second = float(m.cfg.halt_cost * (pi * torch.arange(K)).sum() - 0.5 * pi[0].log()) if stopping else 0.0
    assert float(out.loss) == pytest.approx(alone + second, rel=1e-5)
    batch.answer = torch.tensor([-1, -1])
    with torch.no_grad():
        assert m(batch).loss is None


def test_a_halting_probability_at_the_threshold_does_not_stop():
    m, batch = model(stopping=True), example()
    with torch.no_grad():
        m.halting.w.zero_()
        m.halting.b.zero_()  # h_k = σ(0) = 0.5, the threshold: not past it
        got = m(batch)
    assert got.hops_used.tolist() == [K, K] and got.halted.tolist() == [False, False]
    assert got.halt_probs[0].tolist() == pytest.approx([0.5, 0.5])


def test_a_default_config_builds_the_paper_model_and_its_weights_seed_0():
    from memnet.config import MemN2NConfig
    c = MemN2NConfig()
    m = MemN2N(c, vocab_size=V, answer_words=ANSWERS, memory_size=M)
    assert (m.dim, m.hops, m.encoding, m.temporal is not None, m.tying, m.masking.kind, m.answer.source,
            m.attention.null, m.halting.on, m.supervision) == (c.dim, c.hops, c.encoding, c.temporal, c.tying,
                                                                c.masking, c.answer_from, c.null_memory, c.stopping, 0.0)
    assert m.linear is False and m.tables.shape == (c.hops + 1, V, c.dim)
    again = MemN2N(c, vocab_size=V, answer_words=ANSWERS, memory_size=M)
    seeded = MemN2N(c, vocab_size=V, answer_words=ANSWERS, memory_size=M)
    seeded.reset_parameters(torch.Generator().manual_seed(0), std=0.1, temporal_zero=False)
    for name, value in m.state_dict().items():
        assert torch.equal(value, again.state_dict()[name]) and torch.equal(value, seeded.state_dict()[name])
    assert float(m.tables.detach().std()) == pytest.approx(0.1, rel=0.2)


def test_reset_parameters_draws_every_weight_and_starts_halting_and_the_penalty_where_documented():
    m = model(tying="layerwise", stopping=True, masking="soft")
    with torch.no_grad():
        m.masking.log_penalty.fill_(0.7)
    m.reset_parameters(torch.Generator().manual_seed(1), temporal_zero=True)
    assert m.masking.log_penalty.item() == 0.0 and m.halting.b.item() == -2.0  # a penalty of e^0; every hop taken at first
    assert torch.equal(m.temporal, torch.zeros_like(m.temporal))
    assert m.H.unique().numel() == D * D  # d x d independent draws, not one row repeated
