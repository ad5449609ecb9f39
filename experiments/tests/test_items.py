"""The item reader: the readers' contract (shapes, attention rows sum to one, padding gets none),
an answer scored as the set of its items and the order the story names them, learning generated
qa8's lists, its config section and the CLI."""

import pytest
import torch
import torch.nn.functional as F

from memnet import babi, generator
from memnet.config import ConfigError, load
from memnet.data import Vocab, encode_samples
from memnet.models import build_model
from memnet.trainer import train
from experiments.tests.conftest import through_the_cli
from experiments.readers.items import ItemReader, answer_items


def make(vocab, seed=10, **fields):
    cfg = load(None, {f"model.{k}": v for k, v in {"type": "items", "dim": 8, "hidden": 16, **fields}.items()})
    model = build_model(cfg, vocab)
    model.reset_parameters(torch.Generator().manual_seed(seed))
    return model.eval()


@pytest.fixture(scope="module")
def qa8():
    """A vocabulary and the encoded Batch of 60 generated qa8 stories (lists such as 'apple,milk'),
    the vocabulary's answers with each two-item list's other order too."""
    samples = list(babi.samples(generator.generate(8, 60, seed=3)))
    vocab = Vocab.build(samples)
    lists = [a for a in vocab.answers if a.count(",") == 1]
    assert lists
    vocab = Vocab(vocab.itos, sorted({*vocab.answers, *(",".join(reversed(a.split(","))) for a in lists)}))
    return vocab, encode_samples(samples, vocab, memory_size=50)


def test_answer_items():
    items, member, places = answer_items(["apple", "apple,milk", "milk,apple", "nothing", "s,s"])
    assert items == ["apple", "milk", "nothing", "s"]
    assert member.tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    assert places.tolist() == [[0, -1], [0, 1], [1, 0], [2, -1], [3, 3]]


def test_shapes_and_attention(qa1):
    vocab, batch = qa1
    B, M, A = len(batch), batch.story.shape[1], len(vocab.answers)
    r = make(vocab)(batch)
    assert r.logits.shape == (B, A) and r.attention.shape == (B, 1, M) and r.hop_logits.shape == (B, 1, A)
    assert torch.allclose(r.logits.exp().sum(-1), torch.ones(B), atol=1e-5)
    assert (r.hops_used == 1).all() and not r.halted.any() and r.loss.dim() == 0
    pad = torch.arange(M) >= batch.length[:, None]  # (B, M)
    assert pad.any()
    assert torch.allclose(r.attention.sum(-1), torch.ones(B, 1), atol=1e-5)
    assert (r.attention[:, 0][pad] == 0).all()


def test_padding_changes_nothing(qa8, widened):
    vocab, batch = qa8
    model = make(vocab)
    a, b = model(batch), model(widened(batch))
    assert torch.allclose(a.logits, b.logits, atol=1e-5)
    assert torch.allclose(a.attention, b.attention[..., :batch.story.shape[1]], atol=1e-6)


def first_named(vocab, batch, items):
    """(B, K) the age of the oldest memory naming each item, by a loop over the stories (-1: none)."""
    age = torch.full((len(batch), len(items)), -1.0)
    for b in range(len(batch)):
        for k, item in enumerate(items):
            for i in range(int(batch.length[b])):
                if vocab.stoi.get(item, -1) in batch.story[b, i].tolist():
                    age[b, k] = max(age[b, k], float(batch.time[b, i]))
    return age


def test_a_phrase_scores_its_items_in_and_out_and_the_order_the_story_names_them(qa8):
    """z(a) = Σ_{k∈S_a} log σ(y_k) + Σ_{k∉S_a} log σ(−y_k) + β Σ_p (t_{a_p} − t_{a_p+1}), t the
    age of the oldest memory naming the item, written out phrase by phrase; p = softmax z; the
    loss is −Σ log p(answer)."""
    vocab, batch = qa8
    model = make(vocab)
    with torch.no_grad():
        model.order.fill_(0.7)
    alpha, y = model.read(batch)
    age = first_named(vocab, batch, model.items)
    assert torch.equal(model.first_named(batch), age) and (age >= 0).any() and (age < 0).any()
    index = {w: k for k, w in enumerate(model.items)}
    z = torch.zeros(len(batch), len(vocab.answers))
    for a, answer in enumerate(vocab.answers):
        parts = [index[w] for w in answer.split(",")]
        inside = torch.zeros(len(model.items), dtype=torch.bool)
        inside[parts] = True
        z[:, a] = F.logsigmoid(y[:, inside]).sum(-1) + F.logsigmoid(-y[:, ~inside]).sum(-1)
        for first, second in zip(parts, parts[1:]):
            z[:, a] += 0.7 * (age[:, first] - age[:, second])
    r = model(batch)
    assert torch.allclose(r.logits, z.log_softmax(-1), atol=1e-4)
    assert torch.isclose(r.loss, -r.logits.gather(1, batch.answer[:, None]).sum(), rtol=1e-5)


def test_the_orders_of_one_set_differ_by_the_order_term_alone(qa8):
    """With β = 0 'apple,milk' and 'milk,apple' are as likely; with β > 0 the order whose first
    item the story names first wins, and with β < 0 the other."""
    vocab, batch = qa8
    pairs = [(vocab.answers.index(a), vocab.answers.index(",".join(reversed(a.split(",")))))
             for a in vocab.answers if a.count(",") == 1 and ",".join(reversed(a.split(","))) in vocab.answers]
    assert pairs
    model = make(vocab)
    age = first_named(vocab, batch, model.items)
    for beta in (0.0, 1.0, -1.0):
        with torch.no_grad():
            model.order.fill_(beta)
        logits = model(batch).logits
        for ab, ba in pairs:
            first = model.items.index(vocab.answers[ab].split(",")[0])
            second = model.items.index(vocab.answers[ab].split(",")[1])
            gap = age[:, first] - age[:, second]
            clear = gap != 0  # (named in one memory, or neither named: the orders tie)
            assert clear.sum() > 10
            assert torch.equal(torch.sign(logits[:, ab] - logits[:, ba])[clear], torch.sign(gap * beta)[clear])
            assert torch.allclose(logits[:, ab][~clear], logits[:, ba][~clear])
            if beta == 0.0:
                assert torch.allclose(logits[:, ab], logits[:, ba])


def test_learns_the_lists_of_generated_qa8(tmp_path):
    """Every question trains every item: on held-out questions the reader answers most lists
    right, whole and in order, though a list is a rare answer in training."""
    generator.write_dataset(tmp_path, 8, train=1000, test=200, seed=0)
    cfg = load(None, {"data.dir": str(tmp_path), "data.task": "8", "model.type": "items", "model.dim": 16,
                      "model.hidden": 32, "train.lr": 0.02, "train.lr_decay_every": 15, "train.random_noise": 0.0,
                      "train.linear_start_epochs": 0, "train.epochs": 30, "train.eval_every": 30,
                      "train.threads": 1})
    result = train(cfg, progress=False, log=False)
    samples = list(babi.samples(babi.load_split(tmp_path, 8, "test")))
    batch = encode_samples(samples, result["vocab"], memory_size=50)
    guess = result["model"].eval()(batch).logits.argmax(-1)
    lists = torch.tensor(["," in s.question.answer for s in samples])
    right = guess == batch.answer
    assert lists.sum() >= 5
    assert right[lists].float().mean() > 0.5, (int(right[lists].sum()), int(lists.sum()))
    assert right.float().mean() > 0.8


def test_its_config_section_is_its_own():
    with pytest.raises(ConfigError, match="model.layers: a setting of model.type transformer and universal, not of items"):
        load(None, {"model.type": "items", "model.layers": 2})
    with pytest.raises(ConfigError, match="model.hops: a setting of model.type memn2n, not of items"):
        load(None, {"model.type": "items", "model.hops": 2})
    with pytest.raises(ConfigError, match="model.hidden: expected >= 1, found 0"):
        load(None, {"model.type": "items", "model.hidden": 0})
    cfg = load(None, {"model.type": "items", "model.dim": 16})
    assert cfg.model.dim == 16 and cfg.model.max_words == 20 and cfg.model.hidden == 64


def test_train_eval_and_inspect_cli(tmp_path, capsys):
    model, cfg, _ = through_the_cli(tmp_path, capsys, 8, ["--model.type=items", "--model.dim=8"], steps=1)
    assert isinstance(model, ItemReader) and cfg.model.dim == 8
