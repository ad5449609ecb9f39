"""ACT per position (memnet.models.act) and the Universal Transformer that halts with it: the
arithmetic checked by hand, the halting's gradient, the model's Result, its config switches,
the paper's word masks, and a run of the CLI that inspect, eval and report read."""
import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from memnet import checkpoint
from memnet.cli import main
from memnet.config import ConfigError, load
from memnet.errors import MemnetError
from memnet.models import HALT_REASONS, build_model
from memnet.models.act import Ponder, act_step

# five positions over 3 steps: halts at step 1, at step 2, by the threshold at the last step,
# by the step limit, and padding (never runs)
P = torch.tensor([[0.995, 0.2, 0.2], [0.6, 0.5, 0.9], [0.5, 0.3, 0.6], [0.1, 0.1, 0.1], [0.7, 0.7, 0.7]])
WEIGHTS = [[1.0, 0, 0], [0.6, 0.4, 0], [0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0, 0, 0]]  # p_t before N, R at N
STEPS, REMAINDERS = [1, 2, 3, 3, 0], [1.0, 0.4, 0.2, 0.8, 0.0]
HALTED = [True, True, True, False, False]


def run_by_hand(p: torch.Tensor):
    """act_step over the 3 steps of P, one sequence, 1-d states: step t's new state is
    10 t + i at position i, so every output names the steps it weighs."""
    real = torch.tensor([[True] * 4 + [False]])  # (1, 5)
    state = torch.zeros(1, 5, 1)
    ponder = Ponder.start(state, real)
    weights, states = [], []
    for t in range(3):
        new = (10.0 * (t + 1) + torch.arange(5.0)).view(1, 5, 1)  # s_t
        ponder, state, w = act_step(ponder, state, new, p[None, :, t], last=t == 2, epsilon=0.01)
        weights.append(w[0])
        states.append(state[0, :, 0])
    return ponder, torch.stack(weights, -1), torch.stack(states, -1)  # (5, 3) weights and states read after each step


def test_act_arithmetic_by_hand():
    ponder, weights, states = run_by_hand(P)
    assert torch.allclose(weights, torch.tensor(WEIGHTS))
    assert torch.allclose(weights[:4].sum(-1), torch.ones(4)) and (weights[4] == 0).all()  # Σ_t w_t = 1
    assert ponder.steps[0].tolist() == STEPS and ponder.halted[0].tolist() == HALTED
    assert torch.allclose(ponder.remainder[0], torch.tensor(REMAINDERS))
    assert torch.allclose(ponder.cost()[0], torch.tensor(STEPS) + torch.tensor(REMAINDERS))  # ρ = N + R
    assert not ponder.running.any()
    # a halted position keeps its last state: position 0 stays at s_1, position 1 at s_2
    assert states[0].tolist() == [10, 10, 10] and states[1].tolist() == [11, 21, 21] and states[3].tolist() == [13, 23, 33]
    assert (states[4] == 0).all()  # padding is never updated
    s = 10.0 * torch.arange(1, 4)[None] + torch.arange(5.0)[:, None]  # (5, 3) s_t^i
    assert torch.allclose(ponder.output[0, :, 0], (torch.tensor(WEIGHTS) * s).sum(-1))  # ŝ = Σ_t w_t s_t


def test_the_ponder_cost_reaches_the_halting_probabilities_through_the_remainder():
    """R = 1 - Σ_{n<N} p_n: every p before the halting step has gradient -1, the rest 0."""
    p = P.clone().requires_grad_()
    ponder, _, _ = run_by_hand(p)
    ponder.cost().sum().backward()
    assert torch.equal(p.grad, torch.tensor([[0.0, 0, 0], [-1, 0, 0], [-1, -1, 0], [-1, -1, 0], [0, 0, 0]]))


def make(vocab, seed=10, **fields):
    cfg = load(None, {f"model.{k}": v for k, v in {"type": "universal", "act": True, **fields}.items()})
    model = build_model(cfg, vocab)
    model.reset_parameters(torch.Generator().manual_seed(seed))
    return model


def constant_halting(model, p: float):
    """Every position's p_t = p at every step: W_h = 0, b_h = logit(p)."""
    with torch.no_grad():
        model.act_w.zero_()
        model.act_b.fill_(math.log(p / (1 - p)))
    return model


def test_the_question_halts_by_hand(qa1):
    """p = 0.4 everywhere, 4 steps: Σ p = 0.4, 0.8, 1.2, so every position halts at step 3 with
    R = 0.2 (weights 0.4, 0.4, 0.2, 0): the Result and the ponder cost say so."""
    vocab, batch = qa1
    model = constant_halting(make(vocab, layers=4, ponder_cost=0.0), 0.4)
    reading = model.read(batch)
    r = reading.result
    B, M = len(batch), batch.story.shape[1]
    assert (r.hops_used == 3).all() and r.halted.all()
    assert torch.allclose(r.halt_probs, torch.tensor([0.4, 0.4, 0.2, 0.0]).expand(B, 4))
    real = torch.arange(M) < batch.length[:, None]
    assert torch.equal(reading.steps, torch.cat([torch.full((B, 1), 3), 3 * real], 1))  # N per position
    assert torch.allclose(r.attention[:, :3].sum(-1), torch.ones(B, 3)) and (r.attention[:, 3] == 0).all()
    assert (reading.heads[:, 3] == 0).all() and (reading.scores[:, 3] == -1e30).all()  # no position ran step 4
    assert torch.allclose(r.hop_logits[:, 3], r.hop_logits[:, 2])  # the question's state is kept after it halts
    assert torch.allclose(r.logits, (r.halt_probs[..., None] * r.hop_logits).sum(1), atol=1e-5)  # â = Σ_t w_t â_t
    tau = 0.05
    with_cost = constant_halting(make(vocab, layers=4, ponder_cost=tau), 0.4).read(batch).result.loss
    answered = int((batch.answer >= 0).sum())
    assert torch.allclose(with_cost - r.loss, torch.tensor(tau * 3.2 * answered), rtol=1e-4)  # τ Σ_questions mean_i (N + R)


def test_the_step_limit_stops_without_halting(qa1):
    """p = 0.4 and 2 steps: the limit stops every position at step 2 with R = 0.6."""
    vocab, batch = qa1
    r = constant_halting(make(vocab, layers=2), 0.4)(batch)
    assert (r.hops_used == 2).all() and not r.halted.any()
    assert torch.allclose(r.halt_probs, torch.tensor([0.4, 0.6]).expand(len(batch), 2))
    assert [HALT_REASONS[int(h)] for h in r.halted[:1]] == ["max hops"]


def test_the_gradient_reaches_the_halting_unit(qa1):
    vocab, batch = qa1
    model = make(vocab, layers=4)
    model(batch).loss.backward()
    assert model.act_w.grad.abs().sum() > 0 and model.act_b.grad.abs().sum() > 0


def test_a_question_reads_the_same_alone_as_in_a_batch_and_with_padding(qa1):
    """Halting is per position: the other questions of a batch (and the steps they need) and
    padded memory slots change nothing."""
    vocab, batch = qa1
    model = make(vocab, layers=5)
    M = batch.story.shape[1]
    alone = batch.index(slice(7, 8))
    wider = dataclasses.replace(alone, story=F.pad(alone.story, (0, 2, 0, 3)), time=torch.arange(M + 3)[None])
    with torch.no_grad():
        model.act_b.fill_(0.0)  # p near 1/2: positions halt at different steps
        reading = model.read(batch)
        whole = reading.result
        assert reading.steps[reading.steps > 0].unique().numel() > 1
        for r in (model(alone), model(wider)):
            assert torch.allclose(r.logits, whole.logits[7:8], atol=1e-5) and torch.equal(r.hops_used, whole.hops_used[7:8])
            assert torch.allclose(r.attention[..., :M], whole.attention[7:8], atol=1e-6) and (r.attention[..., M:] == 0).all()


def test_config_errors():
    with pytest.raises(ConfigError, match="model.act: ACT halts each position of one shared layer .* found transformer"):
        load(None, {"model.type": "transformer", "model.act": True})
    with pytest.raises(ConfigError, match="model.act and model.stopping: two halting rules"):
        load(None, {"model.type": "universal", "model.act": True, "model.stopping": True})
    with pytest.raises(ConfigError, match=r"model.act_epsilon: expected between 0 \(inclusive\) and 1, found 1.0"):
        load(None, {"model.type": "universal", "model.act_epsilon": 1})
    with pytest.raises(ConfigError, match="model.ponder_cost: expected a finite number >= 0, found -0.1"):
        load(None, {"model.type": "universal", "model.ponder_cost": -0.1})
    with pytest.raises(ConfigError, match="model.encoding: mask is the transformer readers'"):
        load(None, {"model.encoding": "mask"})
    with pytest.raises(ConfigError, match="model.act: a setting of model.type transformer and universal, not of memn2n"):
        load(None, {"model.act": True})
    with pytest.raises(ConfigError, match="model.max_words: expected >= 1, found 0"):
        load(None, {"model.type": "universal", "model.max_words": 0})
    cfg = load(None, {"model.type": "universal", "model.act": "true", "model.act_epsilon": "0.05"})
    assert cfg.model.act is True and cfg.model.act_epsilon == 0.05 and cfg.model.ponder_cost == 0.01


def test_the_word_masks_start_as_a_bag_of_words_and_cover_max_words(qa1):
    vocab, batch = qa1
    masked, bow = make(vocab, encoding="mask", max_words=12), make(vocab, encoding="bow")
    assert torch.allclose(masked._sentences(batch.story, masked.story_mask), bow._sentences(batch.story))
    masked(batch).loss.backward()
    assert masked.story_mask.grad.abs().sum() > 0 and masked.query_mask.grad.abs().sum() > 0
    too_long = make(vocab, encoding="mask", max_words=3)
    with pytest.raises(MemnetError, match="a sentence has more than model.max_words = 3 words"):
        too_long(batch)


def test_train_inspect_eval_and_report_through_the_cli(babi_fixtures, tmp_path, capsys):
    data, run = babi_fixtures / "en-valid", tmp_path / "run"
    assert main(["train", "--data", str(data), "--task", "1", "--out", str(run), "--quiet", "--config", "none",
                 "--model.type=universal", "--model.act=true", "--model.layers=4", "--model.encoding=mask",
                 "--train.epochs=2", "--train.threads=1"]) == 0
    assert "test: accuracy" in capsys.readouterr().out
    model, cfg, _, _ = checkpoint.load(run / "model.pt")
    assert model.act and cfg.model.act and cfg.model.encoding == "mask" and cfg.model.layers == 4
    assert main(["inspect", "--checkpoint", str(run / "model.pt"), "--data", str(data), "--heads", "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert 1 <= table["hops_used"] <= 4 and table["stop_reason"] in HALT_REASONS and table["max_hops"] == 4
    assert len(table["attention"]) == len(table["heads"]) == table["hops_used"]
    assert main(["eval", "--checkpoint", str(run / "model.pt"), "--data", str(data), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert len(metrics["hop_accuracy"]) == 4 and 1 <= metrics["mean_hops"] <= 4
    assert main(["report", "--checkpoint", str(run / "model.pt"), "--data", str(data), "--out", str(tmp_path / "r.html")]) == 0
    assert ("The model: Universal Transformer, d = 20, 4 steps of one shared layer, 2 heads, ACT halting per position, "
            "learned word masks") in (tmp_path / "r.html").read_text()
