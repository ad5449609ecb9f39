"""Every kernel against the reference model, on the settings its declaration covers (the
tests are generated from the declaration), and the trainer's choice between them."""
import subprocess
import sys

import pytest
import torch

from memnet import babi, config, kernels
from memnet.config import ConfigError
from memnet.data import Vocab, encode_samples
from memnet.evaluation import predict
from memnet.kernels import ANY, numba_memn2n
from memnet.models import build_model, init_weights, restart_model
from memnet.trainer import ReferenceTraining, sgd_step, train

from test_model import STORY
from test_train import quick

KERNELS = [numba_memn2n]
FIXED = {"model.type", "train.device"}  # the settings every test here has (memn2n, cpu)
# settings of several switches at once, and of fields declared ANY, beside each value alone
COMBINATIONS = [
    {"model.masking": "hard", "model.hops": 4, "model.null_memory": False},
    {"model.answer_from": "readout", "model.masking": "hard", "model.temporal_zero_init": True},
    {"model.encoding": "bow", "model.temporal": False},
    {"model.stopping": True, "model.masking": "hard", "model.answer_from": "readout", "model.null_memory": False,
     "model.halt_cost": 0.5},
    {"train.attention_supervision": 0.7},
    {"train.attention_supervision": 0.7, "model.stopping": True, "model.masking": "hard"},
    {"train.attention_supervision": 0.7, "model.stopping": True, "model.null_memory": False,
     "model.answer_from": "readout"},
    {"model.tying": "layerwise", "model.masking": "soft", "model.answer_from": "readout", "model.stopping": True,
     "train.attention_supervision": 0.7},
    {"data.memory_size": 4, "model.dim": 3},
    {"model.answer_from": "question", "model.stopping": True, "model.masking": "soft", "model.halt_cost": 0.3},
    {"model.answer_from": "question", "model.tying": "layerwise", "train.attention_supervision": 0.7,
     "model.stopping": True, "model.masking": "hard"},
    {"model.answer_hidden": 5},
    {"model.answer_hidden": 4, "model.answer_from": "question", "train.attention_supervision": 0.7},
    {"model.answer_hidden": 3, "model.answer_from": "readout", "model.stopping": True, "model.masking": "hard"},
    {"model.answer_hidden": 4, "model.tying": "layerwise", "model.stopping": True, "model.masking": "soft"},
    {"model.answer_hidden": 4, "model.answer_from": "question", "model.stopping": True,
     "model.masking": "soft", "train.attention_supervision": 0.7},
    {"model.answer_hidden": 4, "model.answer_from": "question", "model.stopping": True,
     "model.masking": "hard", "train.attention_supervision": 0.7},
    {"model.answer_hidden": 3, "model.hops": 1, "model.tying": "layerwise"},
    {"model.answer_hidden": 4},
    {"model.answer_hidden": 4, "model.answer_from": "question", "model.masking": "soft",
     "model.relative_time": 2, "model.relative_query": True, "train.attention_supervision": 0.7},
    {"model.answer_hidden": 3, "model.tying": "layerwise", "model.masking": "hard",
     "model.stopping": True, "train.attention_supervision": 0.7},
    {"model.answer_hidden": 3, "model.stopping": True, "model.halt_training": "right",
     "model.halt_init": 0.0, "model.hops": 2},
    {"model.relative_time": 2},
    {"model.relative_time": 3, "model.answer_from": "question", "model.masking": "soft", "model.stopping": True,
     "model.answer_hidden": 4, "train.attention_supervision": 0.7},
    {"model.relative_time": 1, "model.tying": "layerwise", "model.masking": "hard", "model.hops": 4},
    {"model.relative_time": 2, "model.relative_query": True},
    {"model.relative_time": 3, "model.relative_query": True, "model.answer_from": "question", "model.masking": "soft",
     "model.stopping": True, "model.answer_hidden": 4, "train.attention_supervision": 0.7},
    {"model.relative_time": 1, "model.relative_query": True, "model.tying": "layerwise", "model.hops": 4},
    # h_k near 0.5 (halt_init 0): the rule answers some questions from an early hop, whose answer then trains at 1
    {"model.stopping": True, "model.halt_training": "right", "model.masking": "hard", "model.halt_init": 0.0},
    {"model.stopping": True, "model.halt_training": "right", "model.early_answers": 0.3, "model.early_answers_hop1": 0.1,
     "model.answer_from": "question", "model.masking": "soft", "model.answer_hidden": 4,
     "model.relative_time": 3, "model.relative_query": True, "train.attention_supervision": 0.7},
    # right_last: the last hop's answer at 1 too, the others' through inputs whose gradient is stopped
    {"model.stopping": True, "model.halt_training": "right_last", "model.early_answers": 0.7, "model.early_answers_hop1": 0.2,
     "model.halt_init": 0.0, "model.answer_from": "question", "model.masking": "soft", "model.answer_hidden": 4, "model.relative_time": 3, "model.relative_query": True},
    {"model.stopping": True, "model.halt_training": "right_last", "model.early_answers": 0.5, "model.halt_init": 0.0,
     "model.answer_hidden": 3, "model.hops": 4, "train.attention_supervision": 0.7},
    {"model.stopping": True, "model.halt_training": "right_last", "model.halt_init": 0.0, "model.answer_hidden": 3, "model.masking": "hard"},
    # masking second (hop 2 blocked from hop 1's choice, the rest soft) with right_last and both ideas' other settings
    {"model.stopping": True, "model.halt_training": "right_last", "model.early_answers": 0.5, "model.halt_init": 0.0,
     "model.masking": "second", "model.mask_init": -1.0, "model.answer_from": "question", "model.answer_hidden": 4, "model.relative_time": 3, "model.relative_query": True,
     "model.question_table": "offset", "model.attention": "mixed", "train.attention_supervision": 0.7},
    {"model.stopping": True, "model.halt_training": "right_last", "model.early_answers": 0.7, "model.early_answers_hop1": 0.2,
     "model.halt_init": 0.0, "model.answer_from": "question", "model.masking": "soft", "model.answer_hidden": 4, "model.relative_time": 3, "model.relative_query": True,
     "model.question_table": "offset", "model.attention": "mixed", "train.attention_supervision": 0.7},
    {"model.stopping": True, "model.halt_training": "right_last", "model.early_answers": 0.5, "model.halt_init": 0.0,
     "model.answer_from": "readout", "model.answer_hidden": 3, "model.hops": 4,
     "model.masking": "hard", "model.attention": "stick", "model.relative_time": 2},
    {"model.stopping": True, "model.halt_training": "right_last", "model.early_answers": 0.5, "model.halt_init": -0.5,
     "model.answer_from": "question", "model.answer_hidden": 0, "model.tying": "layerwise", "model.masking": "soft",
     "model.relative_time": 2, "model.relative_query": True},
    { "model.stopping": True, "model.halt_training": "right", "model.halt_init": 0.0,
     "model.answer_from": "question", "model.masking": "soft", "model.answer_hidden": 4,
     "model.relative_time": 3, "model.relative_query": True},
    { "model.stopping": True, "model.hops": 4, "train.attention_supervision": 0.7},
    { "model.stopping": True, "model.halt_training": "right_last", "model.halt_init": 0.0,
     "model.early_answers": 0.5, "model.answer_hidden": 3},
    # halt_confidence: at inference the rule goes past a stop whose answer is less sure than this
    {"model.halt_confidence": 0.6, "model.stopping": True, "model.halt_training": "right", "model.halt_init": 0.0,
     "model.answer_from": "question", "model.masking": "soft", "model.answer_hidden": 4,
     "model.relative_time": 3, "model.relative_query": True},
    {"model.halt_confidence": 0.6, "model.stopping": True, "model.hops": 4,
     "model.masking": "hard"},
    # question_table offset with the settings both ideas use
    {"model.question_table": "offset", "model.stopping": True, "model.halt_training": "right", "model.halt_init": 0.0,
     "model.masking": "soft", "train.attention_supervision": 0.7},
    {"model.question_table": "offset", "model.answer_from": "question", "model.answer_hidden": 4, "model.relative_time": 2, "model.relative_query": True},
    # question_table offset (A^1 + B') with both ideas' settings and the pointer reading the hop's state
    {"model.question_table": "offset", "model.stopping": True, "model.halt_training": "right", "model.halt_init": 0.0,
     "model.masking": "soft", "model.answer_from": "question", "model.answer_hidden": 4, "model.relative_time": 2, "model.relative_query": True, "model.halt_confidence": 0.6},
    # attention stick (stick-breaking from the most recent memory back) and mixed (σ(g_k) of it and 1 - σ(g_k) of the
    # softmax), each with masking, with both ideas' settings and the pointer
    *[{"model.attention": attention, **others} for attention in ("stick", "mixed") for others in (
        {"model.masking": "hard", "model.null_memory": False, "model.hops": 4},
        {"model.relative_time": 2, "model.relative_query": True, "model.masking": "soft", "model.stopping": True,
         "model.halt_training": "right", "model.halt_init": 0.0, "model.answer_from": "question",
         "model.answer_hidden": 4, "model.question_table": "offset",
         "model.halt_confidence": 0.6, "train.attention_supervision": 0.7},
        {"model.tying": "layerwise", "model.answer_hidden": 3, "model.stopping": True,
         "train.attention_supervision": 0.7})],
    # soft and second masking with the mixed attention
    {"model.masking": "soft", "model.mask_init": -1.0, "model.stopping": True,
     "model.halt_training": "right", "model.halt_init": 0.0, "model.answer_from": "question", "model.answer_hidden": 4, "model.relative_time": 2, "model.relative_query": True, "model.attention": "mixed"},
    {"model.masking": "second", "model.stopping": True,
     "model.halt_training": "right_last", "model.early_answers": 0.5, "model.halt_init": 0.0,
     "model.answer_from": "question", "model.relative_time": 2, "model.hops": 4},
]


def declared_settings(kernel) -> list[dict]:
    """The default, each value of each enumerated field of the declaration alone, and COMBINATIONS."""
    out = [{}]
    for key, allowed in kernel.COVERS.items():
        if allowed is not ANY and key not in FIXED:
            out += [{key: value} for value in allowed]
    return out + COMBINATIONS


CASES = [(k, s) for k in KERNELS for s in declared_settings(k)]
IDS = [f"{k.NAME}:{','.join(f'{a}={b}' for a, b in s.items()) or 'default'}" for k, s in CASES]


def setup(overrides: dict, seeds: int):
    """A config (d = 6 unless set), the story's vocabulary and questions, and `seeds` reference models."""
    cfg = config.load(None, {"model.dim": 6, "data.memory_size": 8, **overrides})
    samples = list(babi.samples(babi.parse_lines(STORY.splitlines())))
    vocab = Vocab.build(samples, phrases=True)
    batch = encode_samples(samples, vocab, memory_size=cfg.data.memory_size)
    models = [restart_model(cfg, vocab, s) for s in range(seeds)]
    for s, model in enumerate(models):
        if model.answer.hidden:  # V away from its zero start, so that every weight of the module moves
            with torch.no_grad():
                model.answer.V.normal_(generator=torch.Generator().manual_seed(s))
        if model.pointer is not None:  # w away from zero, so that the gradient reaches the earlier hop's attention
            with torch.no_grad():
                model.pointer.w.normal_(generator=torch.Generator().manual_seed(s + 10))
        if model.pointer is not None and model.pointer.r is not None:  # r too, so that the gradient reaches u^k
            with torch.no_grad():
                model.pointer.r.normal_(generator=torch.Generator().manual_seed(s + 20))
        if model.attention.gate is not None:  # each hop's share of stick-breaking away from one half
            with torch.no_grad():
                model.attention.gate.normal_(generator=torch.Generator().manual_seed(s + 40))
        if model.question_table is not None:  # B away from its start, A^1, so that reading A^1 for the question fails
            with torch.no_grad():
                model.question_table.normal_(generator=torch.Generator().manual_seed(s + 30))
    assert kernels.uncovered(KERNELS[0].COVERS, cfg) == []
    return cfg, batch, models


@pytest.mark.parametrize("linear", [False, True])
@pytest.mark.parametrize("kernel,overrides", CASES, ids=IDS)
def test_a_step_is_the_reference_step(kernel, overrides, linear):
    # two seeds, each on its own rows and ages; one SGD step with clipping at a norm the
    # gradients exceed, so the per-seed clipping is exercised too
    cfg, batch, models = setup(overrides, seeds=2)
    idx = torch.tensor([[2, 0, 1], [1, 2, 2]])  # (S, B)
    ages = torch.arange(batch.story.shape[1]).expand(2, 3, -1) + torch.tensor([[[0], [1], [0]], [[2], [0], [1]]])
    fast = kernel.Training(models, batch, max_grad_norm=0.5)
    before = [fast.state_dict(s) for s in range(2)]
    losses = fast.epoch(idx.numpy(), ages.numpy(), 0.05, 3, linear)
    for s, model in enumerate(models):
        model.linear = linear
        rows = batch.index(idx[s])
        rows.time = ages[s]
        loss = model(rows).loss
        loss.backward()
        sgd_step(model, lr=0.05, max_norm=0.5)
        assert losses[s] == pytest.approx(float(loss.detach()), rel=1e-5)
        for name, value in model.state_dict().items():
            changed = not torch.equal(value, before[s][name])
            assert changed or name == "temporal" and not cfg.model.temporal, name
            assert torch.allclose(fast.state_dict(s)[name], value, atol=1e-6), name


def side_by_side(kernel, models, batch):
    """Two restarts trained one step on the same three questions, by the kernel side by side and by
    the reference one at a time, so that only their own settings tell them apart; asserts that
    each restart's loss and weights agree. The kernel's Training and its losses."""
    idx = torch.tensor([[2, 0, 1], [2, 0, 1]])
    fast = kernel.Training(models, batch, max_grad_norm=40.0)
    losses = fast.epoch(idx.numpy(), batch.time.expand(2, 3, -1).numpy()[:, idx[0]], 0.05, 3, False)
    for s, model in enumerate(models):
        loss = model(batch.index(idx[s])).loss
        loss.backward()
        sgd_step(model, lr=0.05, max_norm=40.0)
        assert losses[s] == pytest.approx(float(loss.detach()), rel=1e-5)
        for name, value in model.state_dict().items():
            assert torch.allclose(fast.state_dict(s)[name], value, atol=1e-6), name
    return fast, losses


@pytest.mark.parametrize("kernel", KERNELS)
def test_restarts_of_a_grid_train_and_answer_side_by_side_as_the_reference(kernel):
    """train.restart_grid: restarts with other switches (masking second with right_last beside
    soft with right, another weight for the early answers) train side by side in one kernel, each
    as its own reference model does, and answer as it."""
    overrides = {"model.stopping": True, "model.halt_training": "right", "model.halt_init": 0.0,
                 "model.masking": "soft", "model.answer_from": "question", "model.early_answers": 0.0,
                 "model.answer_hidden": 4, "model.relative_time": 2,
                 "model.relative_query": True, "model.attention": "mixed", "train.restart_grid":
                 "[{}, {model.masking: second, model.halt_training: right_last, model.early_answers: 0.3}]"}
    cfg, batch, models = setup(overrides, seeds=2)
    assert [(m.cfg.masking, m.cfg.halt_training, m.halting.early) for m in models] == [("soft", "right", 0.0),
                                                                                      ("second", "right_last", 0.3)]
    assert kernels.choose(cfg)[0] is kernel
    fast, losses = side_by_side(kernel, models, batch)
    assert losses[0] != pytest.approx(losses[1], rel=1e-3)
    for s, model in enumerate(models):
        assert fast.predict(batch)[s].tolist() == predict(model, batch).logits.argmax(-1).tolist()


@pytest.mark.parametrize("linear", [False, True])
@pytest.mark.parametrize("kernel,overrides", CASES, ids=IDS)
def test_its_answers_are_the_reference_answers(kernel, overrides, linear, questions):
    cfg, _, models = setup(overrides, seeds=2)
    vocab, batch = questions(cfg.data.memory_size)
    models = [init_weights(build_model(cfg, vocab), cfg, s) for s in range(2)]
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # weights away from their start: hops that pick, halting units that stop
        for model in models:
            for value in model.parameters():
                value.add_(0.5 * torch.randn(value.shape, generator=generator))
            if model.halting.on:  # h_1 just above 0.5 at the median question: half stop after hop 1 (not
                # exactly 0.5: that question would sit on the threshold, where rounding decides)
                h_1 = predict(model, batch).halt_probs[:, 0]
                model.halting.b.sub_((h_1 / (1 - h_1)).log().median() - 1e-3)
    fast = kernel.Training(models, batch, max_grad_norm=40.0)
    answers, hops = (torch.from_numpy(x) for x in fast.answers(batch, linear))  # (S, N) each
    for s, model in enumerate(models):
        model.linear = linear
        result = predict(model, batch)
        assert torch.equal(hops[s], result.hops_used)  # where the stopping rule stops (train.hop_cost's count)
        if model.halting.on:
            assert result.hops_used.unique().numel() > 1  # the rule stops questions at different hops
        if model.halting.confidence:  # and some go on past a hop whose h_k passes the threshold
            model.halting.confidence = 0.0
            assert (predict(model, batch).hops_used < result.hops_used).any()
        # the same answers, but where two classes are within rounding (an exact tie: the first, in both)
        best_two = result.logits.topk(2, -1).values  # (N, 2)
        margin = best_two[:, 0] - best_two[:, 1]
        clear = (margin == 0) | (margin > 1e-4)
        assert clear.float().mean() > 0.95
        assert torch.equal(answers[s][clear], result.logits.argmax(-1)[clear])


@pytest.fixture(scope="module")
def questions(tiny):
    """(memory size) -> the vocabulary and questions of the tiny qa1 training file."""
    samples = list(babi.samples(babi.read_file(tiny / "qa1_train.txt")))
    vocab = Vocab.build(samples, phrases=True)
    return lambda memory_size: (vocab, encode_samples(samples, vocab, memory_size=memory_size))


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.NAME for k in KERNELS])
def test_its_accuracy_is_the_reference_accuracy(kernel, questions):
    cfg, _, _ = setup({"model.stopping": True, "model.masking": "hard"}, seeds=1)
    vocab, batch = questions(8)
    models = [init_weights(build_model(cfg, vocab), cfg, s) for s in range(3)]
    fast = kernel.Training(models, batch, max_grad_norm=40.0, threads=2)
    for epoch in range(3):  # a few epochs in: accuracies apart from chance and from each other
        order = torch.stack([torch.randperm(len(batch), generator=torch.Generator().manual_seed(s + epoch))
                             for s in range(3)])
        fast.epoch(order.numpy(), batch.time[order].numpy(), 0.05, 8, False)
    accuracy = fast.accuracy(batch)
    for s, model in enumerate(models):
        model.load_state_dict(fast.state_dict(s))
    reference = ReferenceTraining(models, batch, max_grad_norm=40.0).accuracy(batch)
    assert accuracy.shape == (3,) and len(set(accuracy.tolist())) > 1
    assert accuracy.tolist() == pytest.approx(reference.tolist(), abs=1.5 / len(batch))


def test_the_default_run_is_covered_and_every_setting_is_declared_or_the_loops():
    for kernel in KERNELS:
        cfg = config.load(None, {})
        assert kernels.uncovered(kernel.COVERS, cfg) == []
        assert kernels.choose(cfg)[0] is kernel
        for key in kernel.COVERS:  # a declaration names real fields
            assert key in kernels.settings(cfg), key


@pytest.mark.parametrize("overrides,outside", [
    ({"model.type": "transformer"}, "model.type=transformer"),
    ({"train.device": "cuda"}, "train.device=cuda"),
    ({"train.backend": "torch"}, None),
])
def test_a_setting_outside_the_declaration_falls_back_to_the_reference(overrides, outside):
    cfg = config.load(None, overrides)
    kernel, why = kernels.choose(cfg)
    assert kernel is None
    assert (outside in why) if outside else why == "train.backend is torch"


def test_an_undeclared_switch_falls_back(monkeypatch):
    # a switch added to the config without a declaration (here: masking taken out of it)
    covers = {k: v for k, v in numba_memn2n.COVERS.items() if k != "model.masking"}
    monkeypatch.setattr(numba_memn2n, "COVERS", covers)
    kernel, why = kernels.choose(config.load(None, {}))
    assert kernel is None and why == "the numba kernel does not cover model.masking=off"
    narrowed = {**numba_memn2n.COVERS, "model.masking": ("off", "hard")}
    monkeypatch.setattr(numba_memn2n, "COVERS", narrowed)
    assert kernels.choose(config.load(None, {}))[0] is numba_memn2n
    assert kernels.choose(config.load(None, {"model.masking": "soft"}))[0] is None


@pytest.mark.parametrize("model", [{}, {"model.stopping": True, "model.masking": "hard", "model.answer_from": "readout"},
                                   {"train.attention_supervision": 1.0, "model.stopping": True},
                                   {"model.tying": "layerwise", "model.masking": "soft"},
                                   {"model.answer_hidden": 8, "model.answer_from": "question",
                                    "train.attention_supervision": 1.0}])
def test_training_on_the_kernel_is_training_the_reference(tiny, model):
    # the whole trainer, linear start included: the same seeds, data order and noise give
    # the same weights (to float rounding) and the same accuracy
    overrides = {"train.epochs": 3, "train.linear_start_epochs": 2, "train.restarts": 2, "train.eval_every": 5, **model}
    results = {backend: train(quick(tiny, **overrides, **{"train.backend": backend}), progress=False)
               for backend in ("numba", "torch")}
    assert results["numba"]["training_path"] == "numba"
    assert results["numba"]["valid_accuracy_per_seed"] == results["torch"]["valid_accuracy_per_seed"]
    numba_state, torch_state = (results[b]["model"].state_dict() for b in ("numba", "torch"))
    for name in torch_state:
        assert torch.allclose(numba_state[name], torch_state[name], atol=1e-4), name


def test_seeds_in_parallel_are_the_seeds_one_after_another(tiny):
    runs = [train(quick(tiny, **{"train.epochs": 2, "train.restarts": 3, "train.threads": threads}), progress=False)
            for threads in (1, 2)]
    assert runs[0]["valid_accuracy_per_seed"] == runs[1]["valid_accuracy_per_seed"]
    for name, value in runs[0]["model"].state_dict().items():
        assert torch.equal(value, runs[1]["model"].state_dict()[name]), name


def test_insisting_on_a_kernel_where_it_does_not_apply_fails_clearly(tiny):
    with pytest.raises(ConfigError, match="train.backend: the numba kernel does not cover model.type=transformer"):
        train(quick(tiny, **{"train.backend": "numba", "model.type": "transformer"}), progress=False)
    with pytest.raises(ConfigError, match="train.backend: expected one of auto, numba, torch"):
        config.load(None, {"train.backend": "numpy"})


def test_a_run_says_which_path_it_trains_on_and_why(tiny, capsys):
    train(quick(tiny, **{"model.type": "transformer", "train.epochs": 1}), progress=False)
    out = capsys.readouterr().out
    assert "training on the reference model (torch autograd): the numba kernel does not cover model.type=transformer" in out
    train(quick(tiny, **{"train.epochs": 1}), progress=False)
    assert "training on the numba kernel: its declaration covers every setting of this run" in capsys.readouterr().out


@pytest.mark.parametrize("preset", ["default", "paper", "demo", "joint"])
def test_the_presets_train_on_the_kernel(preset):
    # every field a preset sets, for every restart of its grid, is declared (a new field missing
    # from COVERS and LOOP would send every run to the reference model, some 20x slower)
    kernel, why = kernels.choose(config.load(config.find_preset(preset)))
    assert kernel is numba_memn2n, why


def test_warming_up_loads_both_compiled_loops_for_later_runs():
    """`python -m memnet.kernels` (scripts/setup) compiles or loads the training and the
    answering loop in a fresh process: what the first `memnet train` would otherwise compile."""
    check = ("from memnet.kernels.__main__ import warm\n"
             "from memnet.kernels.numba_step import _seed_epoch\n"
             "from memnet.kernels.numba_forward import _seed_predict\n"
             "assert not _seed_epoch.signatures and not _seed_predict.signatures\n"
             "warm()\n"
             "print(len(_seed_epoch.signatures), len(_seed_predict.signatures))\n")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=600, check=True)
    assert out.stdout.split() == ["1", "1"]
