"""The reference model's contracts: encoding, shapes, attention, masking, stopping, the
starting weights of restarts, checkpoints."""
import pytest
import torch

from memnet import babi, checkpoint
from memnet.config import ConfigError, load
from memnet.data import Vocab, encode_samples
from memnet.errors import MemnetError
from memnet.models import Ensemble, build_model, init_weights, restart_model

STORY = """\
1 Lily is a frog.
2 Bernhard is a frog.
3 Bernhard is green.
4 What color is Lily?\tgreen\t1 2 3
5 Greg is a swan.
6 Greg is white.
7 What color is Greg?\twhite\t6
8 Brian is a swan.
9 What color is Brian?\twhite\t8 5 6
"""

VARIANTS = [
    {},
    {"encoding": "bow", "temporal": False},
    {"tying": "layerwise"},
    {"masking": "hard"},
    {"masking": "soft"},
    {"stopping": True},
    {"stopping": True, "masking": "hard", "hops": 4},
    {"answer_from": "readout", "temporal_zero_init": True, "masking": "hard", "stopping": True},
    {"answer_from": "readout", "tying": "layerwise", "masking": "soft"},
    {"null_memory": True, "masking": "hard"},
    {"null_memory": False},
    {"null_memory": False, "masking": "hard", "stopping": True},
    {"answer_hidden": 5},
    {"answer_hidden": 5, "answer_from": "question", "stopping": True, "masking": "soft", "tying": "layerwise"},
    {"relative_time": 2},
    {"relative_time": 3, "answer_from": "question", "stopping": True, "masking": "hard", "hops": 4},
    {"relative_time": 2, "relative_query": True, "answer_from": "question", "masking": "soft"},
    {"stopping": True, "halt_training": "right", "answer_from": "question", "masking": "soft"},
    {"answer_hidden": 5, "answer_from": "question", "masking": "hard", "relative_time": 2},
    {"attention": "stick", "masking": "soft", "stopping": True, "relative_time": 2, "relative_query": True},
    {"attention": "mixed", "masking": "hard", "answer_from": "question", "relative_time": 2},
]


@pytest.fixture(scope="module")
def data():
    samples = list(babi.samples(babi.parse_lines(STORY.splitlines())))
    vocab = Vocab.build(samples)
    return samples, vocab, encode_samples(samples, vocab, memory_size=50)


def config(supervision=0.0, **kw):
    return load(None, {**{f"model.{k}": v for k, v in kw.items()}, "train.attention_supervision": supervision})


def make(vocab, seed=0, supervision=0.0, **kw):
    """A reference model with the given model.* settings, its weights as restart `seed` starts."""
    cfg = config(supervision, **kw)
    return init_weights(build_model(cfg, vocab), cfg, seed)


def test_encoding_puts_the_most_recent_fact_in_slot_zero(data):
    samples, vocab, batch = data
    assert batch.story.shape == (3, 6, 4)  # 3 questions, 6 facts at most, 4 words at most
    assert batch.length.tolist() == [3, 5, 6]
    assert vocab.decode(batch.story[2, 0].tolist()) == "brian is a swan"
    assert batch.support.tolist() == [[2, 1, 0], [0, -1, -1], [0, 2, 1]]
    assert vocab.decode(batch.story[2, 2].tolist()) == "greg is a swan"
    assert vocab.answers[batch.answer[1]] == "white"


def test_vocabulary_softmax_makes_every_word_an_answer_class(data):
    samples, vocab, _ = data
    full = Vocab.build(samples, every_word=True)
    assert vocab.answers == ["green", "white"]  # the answers seen
    assert full.itos == vocab.itos and set(full.answers) == set(vocab.itos[2:])  # every word but <pad>, <unk>
    batch = encode_samples(samples, full, memory_size=50)
    assert [full.answers[a] for a in batch.answer] == ["green", "white", "white"]
    model = make(full)
    assert model(batch).logits.shape == (3, len(full.itos) - 2)


def test_phrase_answers_get_their_own_row():
    story = "1 Mary went to the kitchen.\n2 Where is Mary?\tkitchen\t1\n3 What is Mary carrying?\tapple,milk\t1\n"
    samples = list(babi.samples(babi.parse_lines(story.splitlines())))
    summed, own = Vocab.build(samples), Vocab.build(samples, phrases=True)
    assert summed.answers == own.answers == ["apple,milk", "kitchen"]
    assert summed.answer_words()[0] == [summed.stoi["apple"], summed.stoi["milk"]]  # 'milk,apple' would score the same
    assert own.answer_words() == [[own.stoi["apple,milk"]], [own.stoi["kitchen"]]]
    batch = encode_samples(samples, own, memory_size=50)
    assert own.stoi["apple,milk"] not in batch.story  # a story never holds the phrase
    assert make(own)(batch).logits.shape == (2, 2)


def test_truncated_memory_drops_old_supporting_facts(data):
    samples, vocab, _ = data
    batch = encode_samples(samples, vocab, memory_size=2)
    assert batch.story.shape[1] == 2
    assert batch.support[0].tolist() == [-1, 1, 0]  # fact 1 is 3 sentences old: out of memory
    assert batch.n_support[0] == 3


def test_unknown_words_are_reported_and_read_as_unk(data):
    _, vocab, _ = data
    story = babi.parse_lines(["1 Zorro is a frog.", "2 What color is Zorro?\tpurple\t1"])
    samples = list(babi.samples(story))
    assert vocab.unknown(samples) == ["zorro"]
    batch = encode_samples(samples, vocab, 50)
    assert batch.story[0, 0, 0] == 1 and batch.answer[0] == -1


@pytest.mark.parametrize("kw", VARIANTS)
def test_shapes_and_attention(data, kw):
    _, vocab, batch = data
    model = make(vocab, **kw)
    K, M = model.hops, batch.story.shape[1]
    r = model(batch)
    assert r.logits.shape == (3, len(vocab.answers))
    assert r.attention.shape == (3, K, M)
    assert r.hop_logits.shape == (3, K, len(vocab.answers))
    assert r.halt_probs.shape == (3, K) and r.hops_used.shape == (3,) and r.halted.shape == (3,)
    assert r.loss.dim() == 0 and torch.isfinite(r.loss)
    taken = torch.arange(K) < r.hops_used[:, None]  # (3, K)
    padding = torch.arange(M) >= batch.length[:, None]  # (3, M)
    assert (r.attention.masked_select(padding[:, None, :]) == 0).all()  # padding: exactly zero
    sums = r.attention.sum(-1)  # (3, K)
    if kw.get("masking") != "hard" and kw.get("null_memory") is False:
        assert torch.allclose(sums[taken], torch.ones(()))
    elif kw.get("masking") != "hard":  # the null memory takes the rest
        assert ((sums[taken] > 0) & (sums[taken] < 1)).all()
    assert (sums[~taken] == 0).all()
    assert torch.allclose(r.halt_probs.sum(-1), torch.ones(()))
    r.loss.backward()


def test_null_memory_is_one_more_softmax_entry_with_score_zero(data):
    # same weights with and without it: hop 1 sees the same scores s_i, so its weights differ
    # only by the normaliser, Σ exp(s_i) against exp(0) + Σ exp(s_i); the null memory takes the rest
    _, vocab, batch = data
    with_null, without = make(vocab, null_memory=True), make(vocab, null_memory=False)
    without.load_state_dict(with_null.state_dict())
    a, b = with_null(batch).attention[:, 0], without(batch).attention[:, 0]  # (3, M) hop 1
    real = torch.arange(a.shape[1]) < batch.length[:, None]
    share = a.sum(-1, keepdim=True)  # (3, 1) = Σ exp(s_i) / (1 + Σ exp(s_i))
    assert torch.allclose(a[real], (b * share)[real], atol=1e-6)
    assert ((share > 0) & (share < 1)).all()


def test_stick_breaking_gives_each_memory_its_share_of_what_the_more_recent_left(data):
    # the same weights as a softmax with the null memory, whose hop 1 weights give back the scores:
    # p_i = e^{s_i} / (1 + Σ_j e^{s_j}), so s_i = log p_i - log(1 - Σ_j p_j); stick-breaking from slot 0,
    # the most recent, gives p_i = σ(s_i) Π_{j < i} (1 - σ(s_j)), and what is left reads nothing
    _, vocab, batch = data
    stick, soft = make(vocab, attention="stick"), make(vocab)
    stick.load_state_dict(soft.state_dict())
    q = soft(batch).attention[:, 0].double()  # (3, M) hop 1
    real = torch.arange(q.shape[1]) < batch.length[:, None]
    s = q.log() - (1 - q.sum(-1, keepdim=True)).log()  # (3, M) the scores
    beta = torch.sigmoid(s).masked_fill(~real, 0.0)
    left = torch.cat([torch.ones_like(beta[:, :1]), (1 - beta).cumprod(-1)[:, :-1]], -1)  # Π_{j < i} (1 - β_j)
    p = stick(batch).attention[:, 0].double()
    assert torch.allclose(p, beta * left, atol=1e-5)
    assert (p[~real] == 0).all() and (p.sum(-1) < 1).all()
    assert not torch.allclose(p, q, atol=1e-3)


def test_mixed_attention_weighs_stick_breaking_and_the_softmax_by_each_hops_learned_share(data):
    _, vocab, batch = data
    mixed, stick, soft = make(vocab, attention="mixed"), make(vocab, attention="stick"), make(vocab)
    assert (mixed.attention.gate == 0).all()  # one half each at the start
    with torch.no_grad():
        mixed.attention.gate.copy_(torch.tensor([1.5, -0.5, 0.0]))
    stick.load_state_dict(soft.state_dict())
    mixed.load_state_dict({**soft.state_dict(), "attention.gate": mixed.attention.gate.detach().clone()})
    share = torch.sigmoid(torch.tensor(1.5))
    a = mixed(batch).attention[:, 0]  # hop 1: the same scores in all three
    assert torch.allclose(a, share * stick(batch).attention[:, 0] + (1 - share) * soft(batch).attention[:, 0], atol=1e-6)
    mixed(batch).loss.backward()
    assert (mixed.attention.gate.grad != 0).all()


def test_mixed_attentions_gates_start_at_stick_init(data):
    """model.stick_init: every hop's g_k starts there, for either initialisation, and the hop's
    attention is then σ(stick_init) stick-breaking; the config refuses a value that is not finite."""
    _, vocab, batch = data
    for seed in (0, 1):
        assert (make(vocab, seed, attention="mixed", init_std=0.3 if seed else 0.1, stick_init=-3.0).attention.gate == -3.0).all()
    mixed, stick, soft = make(vocab, attention="mixed", stick_init=-3.0), make(vocab, attention="stick"), make(vocab)
    share = torch.sigmoid(torch.tensor(-3.0))
    a = mixed(batch).attention[:, 0]
    assert torch.allclose(a, share * stick(batch).attention[:, 0] + (1 - share) * soft(batch).attention[:, 0], atol=1e-6)
    with pytest.raises(ConfigError, match="model.stick_init"):
        config(0.0, attention="mixed", stick_init=float("nan"))


def test_a_restart_grid_starts_each_restart_as_its_entry_says(data):
    """train.restart_grid: restart s is built and starts exactly as a run configured with entry
    s mod n would start it (the same seed), and the entries cycle over the restarts."""
    _, vocab, _ = data
    cfg = load(None, {"model.attention": "mixed", "model.stick_init": 0.5, "train.restarts": 6, "train.restart_grid":
                      "[{}, {model.init_std: 0.3, model.temporal_zero_init: true}, {model.stick_init: -1.5}]"})
    models = [restart_model(cfg, vocab, s) for s in range(6)]
    assert [m.attention.gate[0].item() for m in models] == [0.5, 0.5, -1.5] * 2
    assert [bool((m.temporal == 0).all()) for m in models] == [False, True, False] * 2
    for s, entry in ((1, {"model.init_std": 0.3, "model.temporal_zero_init": True}), (5, {"model.stick_init": -1.5})):
        alone = load(None, {"model.attention": "mixed", "model.stick_init": 0.5, **entry})
        same = init_weights(build_model(alone, vocab), alone, s)
        assert all(torch.equal(v, same.state_dict()[k]) for k, v in models[s].state_dict().items())


def test_a_grid_restart_in_a_checkpoint_answers_as_it_trained(data, tmp_path):
    """A checkpoint names its restart: loaded, the model is built with that restart's grid entry
    (here masking second, which blocks hop 2 from hop 1's choice) and its config says so."""
    _, vocab, batch = data
    cfg = load(None, {"model.stopping": True, "model.halt_training": "right", "model.masking": "soft",
                      "model.null_memory": False, "train.restart_grid":
                      "[{}, {model.masking: second, model.halt_training: right_last}]"})
    soft, second = restart_model(cfg, vocab, 0), restart_model(cfg, vocab, 1)
    assert (soft.cfg.masking, second.cfg.masking, second.cfg.halt_training) == ("soft", "second", "right_last")
    checkpoint.save(tmp_path / "model.pt", second, cfg, vocab, step=1, best_metric=0.5, restarts=[1])
    loaded, loaded_cfg, _, payload = checkpoint.load(tmp_path / "model.pt")
    assert payload["restarts"] == [1] and loaded_cfg.model.masking == "second"
    r = loaded(batch)
    assert torch.equal(r.attention, second.eval()(batch).attention)
    first = r.attention[:, 0].argmax(-1, keepdim=True)  # (3, 1) hop 1's choice
    assert (r.attention[:, 1].gather(-1, first) == 0).all()
    soft.load_state_dict(second.state_dict())
    assert (soft.eval()(batch).attention[:, 1].gather(-1, first) > 0).all()  # restart 0's masking lets it back


def test_hard_masking_never_reattends_a_chosen_memory(data):
    _, vocab, batch = data
    torch.manual_seed(0)
    model = make(vocab, masking="hard", hops=5, null_memory=False)
    r = model(batch)
    chosen = r.attention.argmax(-1)  # (3, 5)
    for k in range(1, 5):
        earlier = chosen[:, :k]  # (3, k)
        assert (r.attention[:, k].gather(-1, earlier) == 0).all()
    # question 0 has 3 memories: hops 4 and 5 find nothing left and attend nowhere
    assert r.attention[0, 3:].sum() == 0 and torch.allclose(r.attention[0, :3].sum(-1), torch.ones(3))
    with_null = make(vocab, masking="hard", hops=5)  # the null memory is never masked: it takes what is left
    assert with_null(batch).attention[0, 3:].sum() == 0


def test_second_masking_blocks_hop_1s_choice_at_hop_2_alone(data):
    """masking second: hop 2 gives hop 1's choice exactly no weight; hop 3 may attend to it
    again, its score lowered by the soft penalty (the same as soft masking gives hop 3)."""
    _, vocab, batch = data
    torch.manual_seed(0)
    model = make(vocab, masking="second", hops=3, null_memory=False)
    r = model(batch)
    first = r.attention[:, 0].argmax(-1, keepdim=True)  # (3, 1) hop 1's choice
    assert (r.attention[:, 1].gather(-1, first) == 0).all()
    assert (r.attention[:, 2].gather(-1, first) > 0).all()
    soft = make(vocab, masking="soft", hops=3, null_memory=False)
    soft.load_state_dict(model.state_dict())
    p_soft = soft(batch).attention
    assert torch.allclose(r.attention[:, 0], p_soft[:, 0]) and not torch.allclose(r.attention[:, 1], p_soft[:, 1])
    hard = make(vocab, masking="hard", hops=3, null_memory=False)
    hard.load_state_dict({k: v for k, v in model.state_dict().items() if k != "masking.log_penalty"})
    assert torch.allclose(r.attention[:, 1], hard(batch).attention[:, 1])  # hop 2 as hard masking's


def test_stopping_reports_hops_and_reasons(data):
    _, vocab, batch = data
    model = make(vocab, stopping=True, hops=3)
    with torch.no_grad():
        model.halting.w.zero_()
        model.halting.b.fill_(5.0)  # always says stop
    r = model(batch)
    assert r.hops_used.tolist() == [1, 1, 1] and r.halted.all()
    assert torch.equal(r.logits, r.hop_logits[:, 0])
    assert (r.attention[:, 1:] == 0).all()
    with torch.no_grad():
        model.halting.b.fill_(-5.0)  # never says stop
    r = model(batch)
    assert r.hops_used.tolist() == [3, 3, 3] and not r.halted.any()


def test_halt_confidence_goes_past_a_stop_whose_answer_is_unsure_at_inference_only(data):
    """halt_confidence τ: in eval mode the rule answers from the first hop whose h_k passes the
    threshold and whose answer's largest probability is at least τ (else the last); in training
    mode the halting unit alone decides, so the loss is the one without τ."""
    _, vocab, batch = data
    model = make(vocab, stopping=True, halt_training="right", answer_from="question", hops=3)
    with torch.no_grad():
        model.halting.w.zero_()
        model.halting.b.fill_(5.0)  # h_k passes the threshold at every hop
    model.eval()
    ungated = model(batch)
    sure = ungated.hop_logits.detach().softmax(-1).amax(-1)  # (B, K) each hop's answer's probability
    assert ungated.hops_used.tolist() == [1, 1, 1] and len(set(sure[:, 0].tolist())) == 3
    model.halting.confidence = float(sure[:, 0].median())  # two questions sure enough at hop 1, one not
    r = model(batch)
    enough = torch.cat([sure[:, :-1] >= model.halting.confidence, torch.ones(3, 1, dtype=torch.bool)], 1)
    assert torch.equal(r.hops_used, enough.float().argmax(-1) + 1) and (r.hops_used > 1).sum() == 1
    assert torch.equal(r.logits, ungated.hop_logits[torch.arange(3), r.hops_used - 1])
    model.train()
    trained = model(batch)
    model.halting.confidence = 0.0
    assert trained.hops_used.tolist() == [1, 1, 1] and torch.equal(trained.loss, model(batch).loss)
    with pytest.raises(ConfigError, match="halt_confidence.*model.stopping"):
        load(None, {"model.halt_confidence": 0.9})
    with pytest.raises(ConfigError, match="halt_confidence"):
        load(None, {"model.stopping": True, "model.halt_confidence": 1.5})


def test_halting_trained_on_rightness_trains_every_hops_answer_and_steers_nothing(data):
    """halt_training right: the loss is Σ_k w_k CE(â_k) + Σ_{k<K} BCE(h_k, [argmax â_k = answer]),
    w_k 1 at the hop the rule answers from and early_answers at the others; the BCE moves the
    halting unit alone, never what the hops read."""
    _, vocab, batch = data
    model = make(vocab, stopping=True, halt_training="right", early_answers=0.3, answer_from="question", hops=3)
    with torch.no_grad():  # h_k = σ(-1) on every hop: no question stops early
        model.halting.w.zero_()
        model.halting.b.fill_(-1.0)
    seen = {}

    def keep_states(_, args):  # what the halting unit reads: the first forward's states (B, K, d)
        seen.setdefault("states", args[0].detach())
    model.halting.register_forward_pre_hook(keep_states)
    r = model(batch)
    assert r.hops_used.tolist() == [3, 3, 3]
    ce = torch.nn.functional.cross_entropy(r.hop_logits.transpose(1, 2), batch.answer[:, None].expand(-1, 3),
                                           reduction="none")  # (B, K) CE(â_k)
    answers = ce[:, 2].sum() + 0.3 * ce[:, :2].sum()
    h = torch.sigmoid(seen["states"][:, :2] @ model.halting.w + model.halting.b)  # (B, 2)
    right = r.hop_logits[:, :2].argmax(-1) == batch.answer[:, None]  # (B, 2)
    bce = -torch.where(right, h.log(), (1 - h).log()).sum()
    assert r.loss.item() == pytest.approx((answers + bce).item(), rel=1e-5)
    tables, halt_w = torch.autograd.grad(r.loss - answers, [model.tables, model.halting.w], allow_unused=True)
    assert tables is None or tables.abs().max() < 1e-5  # the halting's loss reaches no table the hops read
    assert halt_w.abs().sum() > 0
    with torch.no_grad():  # now the rule answers from hop 1: its answer at weight 1, the others at 0.3
        model.halting.b.fill_(5.0)
    r = model(batch)
    assert r.hops_used.tolist() == [1, 1, 1]
    ce = torch.nn.functional.cross_entropy(r.hop_logits.transpose(1, 2), batch.answer[:, None].expand(-1, 3),
                                           reduction="none")
    h = torch.sigmoid(seen["states"][:, :2] @ model.halting.w + model.halting.b)  # the same weights the hops ran with
    bce = -torch.where(right, h.log(), (1 - h).log()).sum()
    assert r.loss.item() == pytest.approx((ce[:, 0].sum() + 0.3 * ce[:, 1:].sum() + bce).item(), rel=1e-5)
    # with early_answers 0, a rule that never stops trains the tables as the last hop's answer alone does
    quiet = make(vocab, stopping=True, halt_training="right", early_answers=0.0, answer_from="question", hops=3,
                 halt_init=-30.0)
    plain = make(vocab, answer_from="question", hops=3)
    g_quiet, = torch.autograd.grad(quiet(batch).loss, [quiet.tables])
    g_plain, = torch.autograd.grad(plain(batch).loss, [plain.tables])
    assert torch.allclose(g_quiet, g_plain, atol=1e-6)


def test_early_answers_hop1_weighs_hop_1s_answer_apart_from_the_later_hops(data):
    """early_answers_hop1: hop 1's answer at its own weight where the rule does not answer from
    it, the later hops' at early_answers; -1 leaves hop 1 at early_answers."""
    _, vocab, batch = data
    kw = dict(stopping=True, halt_training="right", early_answers=0.3, answer_from="question", hops=3, halt_init=-30.0)
    apart, same = make(vocab, early_answers_hop1=0.1, **kw), make(vocab, **kw)
    r, s = apart(batch), same(batch)
    assert r.hops_used.tolist() == [3, 3, 3]
    ce = torch.nn.functional.cross_entropy(r.hop_logits.transpose(1, 2), batch.answer[:, None].expand(-1, 3),
                                           reduction="none")  # (B, K) CE(â_k)
    assert (s.loss - r.loss).item() == pytest.approx(0.2 * ce[:, 0].sum().item(), rel=1e-4)
    assert make(vocab, early_answers_hop1=-1.0, **kw)(batch).loss.item() == pytest.approx(s.loss.item(), rel=1e-6)
    with torch.no_grad():  # the rule answers from hop 1: its answer at 1 whatever early_answers_hop1 says
        apart.halting.b.fill_(30.0)
        same.halting.b.fill_(30.0)
    r, s = apart(batch), same(batch)
    assert r.hops_used.tolist() == [1, 1, 1]
    assert r.loss.item() == pytest.approx(s.loss.item(), rel=1e-6)
    for bad in (-0.5, float("nan")):
        with pytest.raises(ConfigError, match="early_answers_hop1"):
            load(None, {"model.early_answers_hop1": bad})
    assert load(None, {"model.early_answers_hop1": 0.0}).model.early_answers_hop1 == 0.0


def test_halting_right_last_trains_the_last_answer_too_and_the_others_apart_from_the_hops(data):
    """halt_training right_last: the rule's answer and the last hop's at weight 1, every other
    hop's at early_answers; those others train the answer layer but reach no table the hops read."""
    _, vocab, batch = data
    model = make(vocab, stopping=True, halt_training="right_last", early_answers=0.3, answer_from="question", hops=3,
                 answer_hidden=4)
    with torch.no_grad():  # the rule answers from hop 1
        model.halting.w.zero_()
        model.halting.b.fill_(5.0)
        model.answer.V.normal_()
    r = model(batch)
    assert r.hops_used.tolist() == [1, 1, 1]
    ce = torch.nn.functional.cross_entropy(r.hop_logits.transpose(1, 2), batch.answer[:, None].expand(-1, 3),
                                           reduction="none")  # (B, K) CE(â_k)
    answers = ce[:, 0].sum() + ce[:, 2].sum() + 0.3 * ce[:, 1].sum()
    h = torch.sigmoid(model.halting.b)  # h_1 = h_2 on every question (w_h = 0)
    right = r.hop_logits[:, :2].argmax(-1) == batch.answer[:, None]  # (B, 2)
    bce = -torch.where(right, h.log(), (1 - h).log()).sum()
    assert r.loss.item() == pytest.approx((answers + bce).item(), rel=1e-5)
    # the halting's BCE reaches no table, and hop 2's answer reaches the tables only through W's
    # rows (C^K, the last table), never through the tables the hops read before it
    g_loss, = torch.autograd.grad(r.loss, [model.tables], retain_graph=True)
    g_ends, = torch.autograd.grad(ce[:, 0].sum() + ce[:, 2].sum(), [model.tables], retain_graph=True)
    g_mid, = torch.autograd.grad(ce[:, 1].sum(), [model.tables], retain_graph=True)
    assert torch.allclose(g_loss[:-1], g_ends[:-1], atol=1e-6)
    assert g_mid[:-1].abs().max() > 1e-4  # as right would let it
    g_u, = torch.autograd.grad(r.loss, [model.answer.U], retain_graph=True)
    g_u_ends, = torch.autograd.grad(ce[:, 0].sum() + ce[:, 2].sum(), [model.answer.U])
    assert (g_u - g_u_ends).abs().max() > 1e-4  # hop 2's answer does train the answer module
    right = make(vocab, stopping=True, halt_training="right", early_answers=0.3, answer_from="question", hops=3,
                 answer_hidden=4)
    right.load_state_dict(model.state_dict())
    plain = right(batch)  # right: the last hop's answer at 0.3 where the rule stops at hop 1
    assert plain.loss.item() == pytest.approx((r.loss - 0.7 * ce[:, 2].sum()).item(), rel=1e-5)


def test_question_table_offset_starts_tied_and_follows_a1(data):
    """question_table offset: B = A^1 + B' with B' from zero: the same answers and loss as tied at
    the start, A^1 trained by the memories alone and B' by the question: between them they get
    what tied's A^1 gets, and a word only questions hold ('what', 'color') gets nothing in A^1."""
    _, vocab, batch = data
    offset = make(vocab, question_table="offset", hops=2)
    tied = make(vocab, hops=2)
    assert not offset.question_table.any() and torch.equal(offset.tables, tied.tables)
    r_offset, r_tied = offset(batch), tied(batch)
    assert torch.allclose(r_offset.logits, r_tied.logits) and torch.allclose(r_offset.loss, r_tied.loss)
    r_offset.loss.backward()
    r_tied.loss.backward()
    assert torch.allclose(offset.tables.grad[1:], tied.tables.grad[1:], atol=1e-6)
    # A^1: the memories' gradient alone; B': the question's; tied's A^1 gets both
    assert torch.allclose(offset.tables.grad[0] + offset.question_table.grad, tied.tables.grad[0], atol=1e-6)
    asked_only = [vocab.stoi["what"], vocab.stoi["color"]]  # words no story holds
    assert (offset.tables.grad[0][asked_only] == 0).all() and (tied.tables.grad[0][asked_only] != 0).any()
    assert (offset.question_table.grad[asked_only] != 0).any()
    told_only = sorted(set(batch.story.unique().tolist()) - set(batch.query.unique().tolist()) - {0})
    assert told_only and (offset.question_table.grad[told_only] == 0).all()  # words no question holds
    with torch.no_grad():  # A^1 moved: the question moves with it, as tied's does
        offset.tables[0].add_(0.3)
        tied.tables[0].add_(0.3)
    assert torch.allclose(offset(batch).logits, tied(batch).logits, atol=1e-5)
    with torch.no_grad():  # B' moved: the answers move
        offset.question_table.add_(0.5)
    assert not torch.allclose(offset(batch).logits, tied(batch).logits)
    with pytest.raises(ConfigError, match="question_table: offset"):
        load(None, {"model.question_table": "offset", "model.tying": "layerwise"})


def test_config_checks_the_halting_training():
    with pytest.raises(ConfigError, match="halt_training"):
        load(None, {"model.halt_training": "sometimes"})
    with pytest.raises(ConfigError, match="early_answers"):
        load(None, {"model.early_answers": -1.0})


def test_answer_from_readout_answers_from_what_each_hop_read(data):
    _, vocab, batch = data
    readout = make(vocab, answer_from="readout", temporal_zero_init=True)
    assert (readout.temporal == 0).all()
    state = make(vocab)
    state.load_state_dict(readout.state_dict())
    r, s = readout(batch), state(batch)
    assert torch.equal(r.attention, s.attention)  # the hops ask the same u^k; only the answer differs
    question = s.hop_logits[:, 0] - r.hop_logits[:, 0]  # (3, A) W u^1
    for k in range(3):  # W u^{k+1} = W u^1 + Σ_{j<=k} W o^j
        assert torch.allclose(s.hop_logits[:, k], question + r.hop_logits[:, : k + 1].sum(1), atol=1e-5)


def test_restarts_start_from_their_own_weights(data):
    _, vocab, batch = data
    a, b, again = make(vocab, seed=0), make(vocab, seed=1), make(vocab, seed=0)
    assert not torch.equal(a.tables, b.tables) and torch.equal(a.tables, again.tables)
    assert not torch.equal(a(batch).logits, b(batch).logits)


def test_init_std_and_temporal_zero_init_set_how_a_restart_starts(data):
    _, vocab, _ = data
    zero, paper = make(vocab, temporal_zero_init=True, init_std=0.3), make(vocab, init_std=0.1)
    assert zero.temporal.abs().sum() == 0 and paper.temporal.abs().sum() > 0
    assert float(zero.tables.detach().std()) > 0.25 and float(paper.tables.detach().std()) < 0.12


def test_linear_start_removes_the_softmax(data):
    _, vocab, batch = data
    model = make(vocab)
    model.linear = True
    r = model(batch)
    padding = torch.arange(batch.story.shape[1]) >= batch.length[:, None]
    assert (r.attention.masked_select(padding[:, None, :]) == 0).all()
    assert not torch.allclose(r.attention.sum(-1), torch.ones(()))


def test_attention_supervision_adds_a_loss(data):
    _, vocab, batch = data
    plain = make(vocab, stopping=True)
    supervised = make(vocab, stopping=True, supervision=1.0)
    supervised.load_state_dict(plain.state_dict())
    assert supervised(batch).loss > plain(batch).loss


def test_checkpoint_round_trip(data, tmp_path):
    _, vocab, batch = data
    cfg = load(None, {"model.masking": "hard"})
    model = build_model(cfg, vocab)
    checkpoint.save(tmp_path / "model.pt", model, cfg, vocab, step=7, best_metric=0.5)
    loaded, cfg2, vocab2, payload = checkpoint.load(tmp_path / "model.pt")
    assert cfg2 == cfg and vocab2.itos == vocab.itos and payload["step"] == 7
    assert torch.equal(loaded(batch).logits, model.eval()(batch).logits)


def test_corrupt_and_foreign_checkpoints_fail_clearly(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(MemnetError, match="bad.pt"):
        checkpoint.load(bad)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(MemnetError, match="foreign.pt: not a memnet checkpoint"):
        checkpoint.load(foreign)
    with pytest.raises(MemnetError, match="missing.pt"):
        checkpoint.load(tmp_path / "missing.pt")


def test_config_override_errors():
    with pytest.raises(ConfigError, match="model.hopz"):
        load(None, ["model.hopz=3"])
    with pytest.raises(ConfigError, match="model.hops: expected int"):
        load(None, ["model.hops=three"])


def test_gradients_match_finite_differences(data):
    # autograd through the whole reference model, every switch on that has a parameter of its own
    _, vocab, batch = data
    model = make(vocab, dim=4, stopping=True, masking="soft", tying="layerwise", supervision=0.5).double()
    names = [name for name, _ in model.named_parameters()]

    def loss(*params):
        return torch.func.functional_call(model, dict(zip(names, params)), (batch,)).loss

    params = tuple(p.detach().requires_grad_() for p in model.parameters())
    assert torch.autograd.gradcheck(loss, params, fast_mode=True)


def test_an_ensemble_averages_its_members_answer_distributions(data, tmp_path):
    _, vocab, batch = data
    cfg = load(None, {"train.restarts": 3, "train.ensemble": True})
    members = [make(vocab, seed=s) for s in range(3)]
    ensemble = build_model(cfg, vocab)
    ensemble.load_state_dict({f"members.{i}.{k}": v for i, m in enumerate(members) for k, v in m.state_dict().items()})
    r = ensemble(batch)
    mean = torch.stack([m(batch).logits.softmax(-1) for m in members]).mean(0)  # (3, A)
    assert torch.allclose(r.logits.exp(), mean, atol=1e-6)
    assert torch.equal(r.attention, members[0](batch).attention)  # the first member's attention
    checkpoint.save(tmp_path / "e.pt", ensemble, cfg, vocab, step=1, best_metric=0.5)
    loaded, *_ = checkpoint.load(tmp_path / "e.pt")
    assert torch.allclose(loaded(batch).logits, r.logits)



def test_an_ensemble_stops_together_where_most_members_rules_say_stop(data, tmp_path):
    """train.ensemble_halting together: the ensemble answers after the first hop where more than
    half of its members' rules stop (else the last), with every member's answer after that hop
    averaged; members (the default): each member answers from its own hop, the hops the first's."""
    _, vocab, batch = data
    settings = {"train.restarts": 3, "train.ensemble": True, "model.stopping": True}
    members = [make(vocab, seed=s, stopping=True, hops=3) for s in range(3)]
    for member, bias in zip(members, (5.0, -5.0, -5.0)):  # the first stops after hop 1, the others never
        with torch.no_grad():
            member.halting.w.zero_()
            member.halting.b.fill_(bias)
    weights = {f"members.{i}.{k}": v for i, m in enumerate(members) for k, v in m.state_dict().items()}
    alone = build_model(load(None, settings), vocab)
    together = build_model(load(None, {**settings, "train.ensemble_halting": "together"}), vocab)
    alone.load_state_dict(weights), together.load_state_dict(weights)
    own = [m(batch) for m in members]
    hop = torch.stack([r.hop_logits.softmax(-1) for r in own]).mean(0)  # (B, K, A) the mean after each hop
    r = alone(batch)
    assert r.hops_used.tolist() == [1, 1, 1] and r.halted.all()  # the first member's
    assert torch.allclose(r.logits.exp(), torch.stack([o.logits.softmax(-1) for o in own]).mean(0), atol=1e-6)
    r = together(batch)  # one of three says stop after hop 1: on to the last hop
    assert r.hops_used.tolist() == [3, 3, 3] and not r.halted.any()
    assert torch.allclose(r.logits.exp(), hop[:, 2], atol=1e-6)
    assert (r.attention[:, 1:].sum(-1) > 0.5).all()  # the first member's attention, past its own stop
    with torch.no_grad():
        together.members[1].halting.b.fill_(5.0)  # two of three say stop after hop 1
    r = together(batch)
    assert r.hops_used.tolist() == [1, 1, 1] and r.halted.all() and r.stops[:, 0].all()
    assert torch.allclose(r.logits.exp(), hop[:, 0], atol=1e-6)
    assert (r.attention[:, 1:] == 0).all()
    cfg = load(None, {**settings, "train.ensemble_halting": "together"})
    checkpoint.save(tmp_path / "e.pt", together, cfg, vocab, step=1, best_metric=0.5)
    loaded, *_ = checkpoint.load(tmp_path / "e.pt")
    again = loaded(batch)
    assert loaded.halting == "together" and torch.equal(again.hops_used, r.hops_used)
    assert torch.allclose(again.logits, r.logits)
    own = Ensemble(list(together.members))  # the same members, each on its own rule again
    assert (own(batch).attention[:, 1:] == 0).all()  # the first member's hops: it stops after hop 1


def test_the_halting_bias_starts_at_halt_init(data):
    """b_h starts at model.halt_init whatever the initial scale (the
    default -2 as before): every hop's halting probability near σ(b_h) at first."""
    _, vocab, batch = data
    for kw, bias in (({}, -2.0), ({"halt_init": -4.0}, -4.0)):
        for seed, std in ((0, 0.3), (1, 0.1)):
            model = make(vocab, seed, stopping=True, init_std=std, **kw)
            assert model.halting.b.item() == bias
    model = make(vocab, stopping=True, halt_init=-4.0, hops=3)
    with torch.no_grad():
        model.halting.w.zero_()
    assert torch.allclose(model(batch).halt_probs[:, 0], torch.sigmoid(torch.tensor(-4.0)))


def test_the_soft_masking_penalty_starts_at_mask_init(data):
    """Soft masking's learned penalty starts at e^mask_init (e^0 = 1 by default) and lowers a
    visited memory's score by exactly that."""
    _, vocab, batch = data
    for kw, x in (({}, 0.0), ({"mask_init": -3.0}, -3.0)):
        for seed in (0, 1):
            assert make(vocab, seed, masking="soft", init_std=0.3 if seed else 0.1, **kw).masking.log_penalty.item() == x
    model = make(vocab, masking="soft", mask_init=-3.0, hops=2)
    r = model(batch)
    first = r.attention[:, 0].argmax(-1)  # hop 1's choice: visited for hop 2
    off = make(vocab, masking="off", hops=2)
    off.load_state_dict({k: v for k, v in model.state_dict().items() if k != "masking.log_penalty"})
    p_off = off(batch).attention[:, 1]
    # the softmax of hop 2 with one score lowered by e^-3: the ratio of that memory's weight to another's
    other = (first + 1) % batch.length.min()
    ratio_soft = r.attention[:, 1].gather(1, first[:, None]) / r.attention[:, 1].gather(1, other[:, None])
    ratio_off = p_off.gather(1, first[:, None]) / p_off.gather(1, other[:, None])
    assert torch.allclose(torch.log(ratio_off) - torch.log(ratio_soft), torch.full_like(ratio_soft, 0.049787068), atol=1e-4)


def test_the_answer_module_starts_silent_and_reads_no_other_hops_read_out(data):
    """model.answer_hidden: V starts at zero, so the model answers as without the module (the
    other weights drawn as before); hop k's module never reads a later hop's read-out; the
    module trains (its loss gradient reaches V)."""
    _, vocab, batch = data
    for seed in (0, 1):
        std = 0.3 if seed else 0.1
        plain, module = make(vocab, seed, init_std=std), make(vocab, seed, init_std=std, answer_hidden=8)
        for name, value in plain.state_dict().items():
            assert torch.equal(module.state_dict()[name], value), name
        assert torch.equal(module(batch).hop_logits, plain(batch).hop_logits)
        assert (module.answer.V == 0).all() and module.answer.U.abs().sum() > 0
    model, a, b = module_logits(vocab, moved_hop=2)  # only hop 3's read-out moves
    assert torch.equal(a[:, :2], b[:, :2]) and not torch.equal(a[:, 2], b[:, 2])
    r = model(batch)
    r.loss.backward()
    assert model.answer.V.grad.abs().sum() > 0 and model.answer.U.grad.abs().sum() > 0


def test_the_answer_module_reads_the_question_and_its_own_hops_read_out_alone(data):
    """hop k's module reads [u^1; o^k] (U has 2d rows): moving o^k moves hop k's logits alone,
    and moving the question moves every hop's."""
    _, vocab, _ = data
    for hop in range(3):
        model, a, b = module_logits(vocab, moved_hop=hop)
        assert model.answer.U.shape == (2 * model.dim, 8)
        others = [k for k in range(3) if k != hop]
        assert not torch.equal(a[:, hop], b[:, hop]) and torch.equal(a[:, others], b[:, others])
    torch.manual_seed(5)
    question, reads = torch.randn(3, model.dim), torch.randn(3, 3, model.dim)
    zero, W = torch.zeros_like(reads), torch.zeros(len(vocab.answers), model.dim)
    moved = model.answer(zero, W, question + 1.0, reads) - model.answer(zero, W, question, reads)
    assert (moved.abs().amax(-1) > 0).all()


def test_the_pointer_in_time_adds_the_weight_of_each_age_difference_from_the_last_hops_read(data):
    """model.relative_time D: hop k > 1's score of memory i adds Σ_j p^{k-1}_j w^k[age_i - age_j]
    (differences clipped to ±D); hop 1 is untouched, w starts at zero, and w learns."""
    _, vocab, batch = data
    model = make(vocab, relative_time=2)
    assert model.pointer.w.shape == (2, 5) and (model.pointer.w == 0).all()
    with torch.no_grad():
        model.pointer.w.copy_(torch.randn(2, 5, generator=torch.Generator().manual_seed(3)))
    plain = make(vocab)
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if k != "pointer.w"})
    a, b = model(batch), plain(batch)
    assert torch.allclose(a.attention[:, 0], b.attention[:, 0])  # hop 1: no earlier read
    p1 = a.attention[:, 0]  # (B, M)
    diff = (batch.time[:, :, None] - batch.time[:, None, :]).clamp(-2, 2) + 2  # (B, M, M)
    bias = torch.einsum("bj,bij->bi", p1, model.pointer.w[0][diff])  # (B, M) hop 2's added score
    # with the same u^2 (hop 1 is the same), hop 2's log-odds between two real memories move by the bias
    for q in range(batch.story.shape[0]):
        n = int(batch.length[q])
        log_a, log_b = a.attention[q, 1, :n].log(), b.attention[q, 1, :n].log()
        moved = (log_a - log_a[0]) - (log_b - log_b[0])
        assert torch.allclose(moved, bias[q, :n] - bias[q, 0], atol=1e-4)
    assert not torch.allclose(a.attention[:, 2], b.attention[:, 2])
    model(batch).loss.backward()
    assert model.pointer.w.grad[1].abs().sum() > 0


def test_the_pointers_weights_can_read_the_hops_state(data):
    """model.relative_query: hop k's weight per age difference is w^k + r^k u^k. With r at zero
    (its start) the model is the pointer of w alone; away from zero, hop 2's log-odds move by
    Σ_j p^1_j (r^2 u^2)[age_i - age_j], and r learns."""
    _, vocab, batch = data
    model = make(vocab, relative_time=2, relative_query=True)
    assert model.pointer.r.shape == (2, 5, model.dim) and (model.pointer.r == 0).all()
    plain = make(vocab, relative_time=2)
    generator = torch.Generator().manual_seed(4)
    with torch.no_grad():
        model.pointer.w.copy_(torch.randn(2, 5, generator=generator))
    plain.load_state_dict({k: v for k, v in model.state_dict().items() if k != "pointer.r"})
    assert torch.equal(model(batch).attention, plain(batch).attention)  # r = 0: w alone
    with torch.no_grad():
        model.pointer.r.copy_(torch.randn(2, 5, model.dim, generator=generator))
    a, b = model(batch), plain(batch)
    assert torch.allclose(a.attention[:, 0], b.attention[:, 0])  # hop 1: no earlier read
    u2 = model.embed(batch.query, model.weights(batch.query), 0) + torch.einsum(  # u^2 = u^1 + o^1
        "bm,bmd->bd", a.attention[:, 0], model.embed(batch.story, model.weights(batch.story), 1, batch.time))
    diff = (batch.time[:, :, None] - batch.time[:, None, :]).clamp(-2, 2) + 2  # (B, M, M)
    per_gap = u2 @ model.pointer.r[0].T  # (B, 5): r^2 u^2, what the state adds to each gap's weight
    bias = torch.einsum("bj,bij->bi", a.attention[:, 0], per_gap.gather(1, diff.flatten(1)).view(diff.shape))
    for q in range(batch.story.shape[0]):
        n = int(batch.length[q])
        log_a, log_b = a.attention[q, 1, :n].log(), b.attention[q, 1, :n].log()
        moved = (log_a - log_a[0]) - (log_b - log_b[0])
        assert torch.allclose(moved, bias[q, :n] - bias[q, 0], atol=1e-4)
    model(batch).loss.backward()
    assert model.pointer.r.grad[0].abs().sum() > 0 and model.pointer.r.grad[1].abs().sum() > 0


def module_logits(vocab, moved_hop, **kw):
    """A model with an answer module (8 units, V drawn away from zero), and its module's logits
    (3, K, A) on random inputs, then on the same with hop `moved_hop`'s read-out moved."""
    model = make(vocab, answer_hidden=8, answer_from="question", **kw)
    with torch.no_grad():
        model.answer.V.normal_(generator=torch.Generator().manual_seed(1))
    torch.manual_seed(4)
    question, reads = torch.randn(3, model.dim), torch.randn(3, 3, model.dim)
    moved = reads.clone()
    moved[:, moved_hop] += 1.0
    zero, W = torch.zeros_like(reads), model.answer_bag @ model.tables[-1]  # states 0: the module's logits alone
    return model, model.answer(zero, W, question, reads), model.answer(zero, W, question, moved)


def test_the_answer_modules_gradients_match_finite_differences(data):
    _, vocab, batch = data
    model = make(vocab, dim=3, hops=2, answer_hidden=4, answer_from="question", stopping=True, supervision=0.5).double()
    with torch.no_grad():
        model.answer.V.normal_(generator=torch.Generator().manual_seed(2))
    names = [name for name, _ in model.named_parameters()]

    def loss(*params):
        return torch.func.functional_call(model, dict(zip(names, params)), (batch,)).loss

    params = tuple(p.detach().requires_grad_() for p in model.parameters())
    assert torch.autograd.gradcheck(loss, params, fast_mode=True)
