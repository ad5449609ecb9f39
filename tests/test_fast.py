"""The compiled loops (memnet.fast) against the torch model they must match: step for step in
training, answer for answer in evaluation."""
import pytest
import torch

from memnet import babi, config
from memnet.config import ConfigError, ModelConfig
from memnet.data import Vocab, encode_samples
from memnet.fast import Questions, Stepper, unsupported
from memnet.model import build_model
from memnet.train import _seed_accuracy, _sgd_step, predict, train

from test_model import STORY
from test_train import quick

COVERED = [
    {},
    {"masking": "hard"},
    {"answer_from": "readout", "masking": "hard", "temporal_zero_init": True},
    {"encoding": "bow", "temporal": False},
    {"null_memory": False},
    {"null_memory": False, "masking": "hard", "hops": 4},
    {"stopping": True},
    {"stopping": True, "masking": "hard", "answer_from": "readout", "null_memory": False, "halt_cost": 0.5},
    {"supervision": 0.7},
    {"supervision": 0.7, "stopping": True, "masking": "hard"},
    {"supervision": 0.7, "stopping": True, "null_memory": False, "answer_from": "readout"},
    {"tying": "layerwise"},
    {"masking": "soft"},
    {"tying": "layerwise", "masking": "soft", "answer_from": "readout", "stopping": True, "supervision": 0.7},
]


def encoded(stories):
    """The vocabulary of some stories, and their questions as one Batch (memory 8)."""
    samples = list(babi.samples(stories))
    vocab = Vocab.build(samples, phrases=True)
    return vocab, encode_samples(samples, vocab, memory_size=8)


@pytest.fixture(scope="module")
def data():
    return encoded(babi.parse_lines(STORY.splitlines()))


@pytest.mark.parametrize("linear", [False, True])
@pytest.mark.parametrize("kw", COVERED)
def test_a_step_is_the_torch_models_step(data, kw, linear):
    # two seeds, each on its own rows and ages; one SGD step with clipping at a norm the
    # gradients exceed, so the per-seed clipping is exercised too
    vocab, batch = data
    kw = dict(kw)
    supervision = kw.pop("supervision", 0.0)
    model = build_model(ModelConfig(dim=6, **kw), len(vocab), len(vocab.answers), answer_words=vocab.answer_words(),
                        memory_size=8, seeds=2, attention_supervision=supervision)
    model.linear = linear
    idx = torch.tensor([[2, 0, 1], [1, 2, 2]])  # (S, B)
    ages = torch.arange(batch.story.shape[1]).expand(2, 3, -1) + torch.tensor([[[0], [1], [0]], [[2], [0], [1]]])
    before = {k: v.clone() for k, v in model.state_dict().items()}

    rows = model.prepare(batch).index(idx)
    rows.time = ages
    loss = model(rows).loss
    loss.backward()
    _sgd_step(list(model.parameters()), lr=0.05, max_norm=0.5)
    expected = {k: v.clone() for k, v in model.state_dict().items()}

    model.load_state_dict(before)
    fast_loss = Stepper(model, batch, max_grad_norm=0.5).step(idx.numpy(), ages.numpy(), 0.05, linear)
    assert fast_loss == pytest.approx(float(loss.detach()), rel=1e-5)
    for name, value in model.state_dict().items():
        assert not torch.equal(value, before[name]) or name == "temporal" and kw.get("temporal") is False
        assert torch.allclose(value, expected[name], atol=1e-6), name


@pytest.fixture(scope="module")
def questions(tiny):
    return encoded(babi.read_file(tiny / "qa1_train.txt"))


@pytest.mark.parametrize("linear", [False, True])
@pytest.mark.parametrize("kw", COVERED)
def test_its_answers_are_the_torch_models_answers(questions, kw, linear):
    vocab, batch = questions
    kw = {k: v for k, v in kw.items() if k != "supervision"}  # a training loss: no part in answering
    model = build_model(ModelConfig(dim=6, **kw), len(vocab), len(vocab.answers), answer_words=vocab.answer_words(),
                        memory_size=8, seeds=2)
    model.linear = linear
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # weights away from their start: hops that pick, halting units that stop
        for value in model.parameters():
            value.add_(0.5 * torch.randn(value.shape, generator=generator))
        if model.cfg.stopping:
            model.halt_b.zero_()
    batch = model.prepare(batch)
    result = predict(model, batch)
    if model.cfg.stopping:
        assert 0 < (result.hops_used < model.cfg.hops).float().mean() < 1  # some questions stop early
    answers = torch.from_numpy(Stepper(model, batch, max_grad_norm=40.0).predict(Questions(batch, model.cfg.encoding), linear))
    # the same answers, but where two classes are within rounding (an exact tie: the first, in both)
    best_two = result.logits.topk(2, -1).values  # (S, N, 2)
    margin = best_two[..., 0] - best_two[..., 1]
    clear = (margin == 0) | (margin > 1e-4)
    assert clear.float().mean() > 0.95
    assert torch.equal(answers[clear], result.logits.argmax(-1)[clear])


def test_its_accuracy_is_the_trainers(questions):
    vocab, batch = questions
    model = build_model(ModelConfig(dim=6, stopping=True, masking="hard"), len(vocab), len(vocab.answers),
                        answer_words=vocab.answer_words(), memory_size=8, seeds=3)
    batch = model.prepare(batch)
    stepper = Stepper(model, batch, max_grad_norm=40.0, threads=2)
    for _ in range(3):  # a few epochs in: accuracies apart from chance and from each other
        order = torch.stack([torch.randperm(len(batch), generator=torch.Generator().manual_seed(s)) for s in range(3)])
        stepper.epoch(order.numpy(), batch.time[order].numpy(), 0.05, 8, False)
    accuracy = stepper.accuracy(stepper.data)
    assert accuracy.shape == (3,) and len(set(accuracy.tolist())) > 1
    assert accuracy.tolist() == pytest.approx(_seed_accuracy(model, batch).tolist(), abs=1.5 / len(batch))


def test_what_it_does_not_cover_is_named(data):
    vocab, _ = data
    transformer = build_model(ModelConfig(type="transformer"), len(vocab), len(vocab.answers),
                              answer_words=vocab.answer_words())
    assert unsupported(transformer, torch.device("cpu")) == "model.type transformer"
    model = build_model(ModelConfig(), len(vocab), len(vocab.answers), answer_words=vocab.answer_words())
    assert unsupported(model, torch.device("cpu")) is None
    assert unsupported(model, torch.device("meta")) == "device meta"


@pytest.mark.parametrize("model", [{}, {"model.stopping": True, "model.masking": "hard", "model.answer_from": "readout"},
                                   {"train.attention_supervision": 1.0, "model.stopping": True},
                                   {"model.tying": "layerwise", "model.masking": "soft"}])
def test_training_with_it_is_training_with_torch(tiny, model):
    # the whole trainer, linear start included: the same seeds, data order and noise give
    # the same weights (to float rounding) and the same accuracy
    overrides = {"train.epochs": 3, "train.linear_start_epochs": 2, "train.restarts": 2, "train.eval_every": 5, **model}
    results = {backend: train(quick(tiny, **overrides, **{"train.backend": backend}), progress=False)
               for backend in ("numba", "torch")}
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


def test_insisting_on_it_where_it_does_not_apply_fails_clearly(tiny):
    with pytest.raises(ConfigError, match="train.backend: numba does not cover model.type transformer; use auto or torch"):
        train(quick(tiny, **{"train.backend": "numba", "model.type": "transformer"}), progress=False)
    with pytest.raises(ConfigError, match="train.backend: expected one of auto, numba, torch"):
        config.load(None, {"train.backend": "numpy"})


def test_a_run_it_does_not_cover_says_why(tiny, capsys):
    train(quick(tiny, **{"model.type": "transformer", "train.epochs": 1}), progress=False)
    assert "training with the torch step: the compiled loop does not cover model.type transformer" in capsys.readouterr().out
    train(quick(tiny, **{"train.epochs": 1}), progress=False)
    assert "torch step" not in capsys.readouterr().out
