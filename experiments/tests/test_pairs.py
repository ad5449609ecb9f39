"""The pair reader: the readers' contract (shapes, attention rows sum to one, padding gets none),
its answer as the pairs' mixture, answers by places, attention supervision on the pair of
supporting facts, learning generated qa19's pairs, its config section and the CLI."""

import pytest
import torch

from memnet import babi, generator
from memnet.config import ConfigError, load
from memnet.data import Vocab, encode_samples
from memnet.errors import MemnetError
from memnet.models import build_model
from experiments.readers.pairs import NONE, PairReader, phrase_places
from memnet.trainer import train
from experiments.tests.conftest import through_the_cli


def make(vocab, seed=10, supervision=0.0, **fields):
    cfg = load(None, {"train.attention_supervision": supervision,
                      **{f"model.{k}": v for k, v in {"type": "pairs", "dim": 8, "hidden": 16, **fields}.items()}})
    model = build_model(cfg, vocab)
    model.reset_parameters(torch.Generator().manual_seed(seed))
    return model.eval()


@pytest.fixture(scope="module")
def qa19():
    """A vocabulary and the encoded Batch of 40 generated qa19 stories (two facts per answer, 'n,e' answers)."""
    samples = list(babi.samples(generator.generate(19, 40, seed=3)))
    vocab = Vocab.build(samples)
    return vocab, encode_samples(samples, vocab, memory_size=50)


def test_shapes_and_attention(qa1):
    vocab, batch = qa1
    B, M, A = len(batch), batch.story.shape[1], len(vocab.answers)
    r = make(vocab)(batch)
    assert r.logits.shape == (B, A) and r.attention.shape == (B, 2, M) and r.hop_logits.shape == (B, 2, A)
    assert (r.hops_used == 2).all() and not r.halted.any() and r.loss.dim() == 0
    pad = torch.arange(M) >= batch.length[:, None]  # (B, M)
    assert pad.any()
    assert torch.allclose(r.attention.sum(-1), torch.ones(B, 2), atol=1e-5)
    assert (r.attention.masked_select(pad[:, None].expand_as(r.attention)) == 0).all()


def phi(model, batch):
    """φ_ij = [u; m_i; m_j; u ⊙ m_i; u ⊙ m_j; m_i ⊙ m_j] (B, M, M, 6d), written out in full."""
    m, u = model.sentences(batch)
    B, M, _ = m.shape
    mi, mj, uu = m[:, :, None].expand(B, M, M, -1), m[:, None].expand(B, M, M, -1), u[:, None, None].expand(B, M, M, -1)
    return torch.cat([uu, mi, mj, uu * mi, uu * mj, mi * mj], -1)


def test_the_answer_is_the_pairs_mixture(qa19):
    """p_ij = softmax of the score MLP on φ_ij over the real pairs (i = j included), p(a) = Σ_ij p_ij
    softmax(â_ij)(a); the first place's attention is p's row sums, the second's its column sums."""
    vocab, batch = qa19
    model = make(vocab)
    r = model(batch)
    p, answers, real = model.read(batch)
    x = phi(model, batch)  # the read computes only m_i ⊙ m_j's part per pair: the same numbers
    score = torch.relu(torch.relu(x @ model.s1 + model.s1_b) @ model.s2 + model.s2_b) @ model.s3
    expected = score.masked_fill(~real, -torch.inf).flatten(1).softmax(-1).view_as(p).nan_to_num()
    assert torch.allclose(p, expected, atol=1e-6) and (p[~real] == 0).all() and (p[real] > 0).all()
    out = torch.relu(torch.relu(x @ model.a1 + model.a1_b) @ model.a2 + model.a2_b) @ model.a3 + model.a3_b
    assert torch.allclose(answers, model.by_places(out), atol=1e-5)
    mixture = (p[..., None] * answers.softmax(-1)).sum((1, 2))  # (B, A)
    assert torch.allclose(r.logits.exp(), mixture, atol=1e-5)
    assert torch.allclose(r.attention[:, 0], p.sum(2)) and torch.allclose(r.attention[:, 1], p.sum(1))
    # the first and second fact of a pair are not interchangeable
    assert not torch.allclose(r.attention[:, 0], r.attention[:, 1], atol=1e-3)


def test_padding_changes_nothing(qa19, widened):
    vocab, batch = qa19
    model = make(vocab)
    wider = widened(batch)
    a, b = model(batch), model(wider)
    M = batch.story.shape[1]
    assert torch.allclose(a.logits, b.logits, atol=1e-5) and torch.allclose(a.loss, b.loss, rtol=1e-5)
    assert torch.allclose(a.attention, b.attention[..., :M], atol=1e-6) and (b.attention[..., M:] == 0).all()


def test_phrases_score_by_places():
    places = phrase_places(["e,n", "n", "n,e"])
    words = ["e", "n", NONE]
    assert [[words[i] for i in row] for row in places.tolist()] == [["e", "n"], ["n", NONE], ["n", "e"]]


def test_an_answer_scores_the_sum_of_its_words_at_their_places(qa19):
    """'n,e' = score(n first) + score(e second); 'e,n' differs; without places one score per phrase."""
    vocab, batch = qa19
    model = make(vocab)
    out = torch.randn(len(batch), 2 * (len(model.places.unique())))  # (B, P · W) a score per place and word
    by_place = out.view(len(batch), 2, -1)
    words = sorted({w for a in vocab.answers for w in a.split(",")}) + [NONE]
    scores = model.by_places(out)
    for a, answer in enumerate(vocab.answers):
        first, second = answer.split(",")
        expected = by_place[:, 0, words.index(first)] + by_place[:, 1, words.index(second)]
        assert torch.allclose(scores[:, a], expected, atol=1e-5), answer
    ne, en = vocab.answers.index("n,e"), vocab.answers.index("e,n")
    assert not torch.allclose(scores[:, ne], scores[:, en])
    whole = make(vocab, places=False)
    assert whole.read(batch)[1].shape[-1] == whole.a3.shape[-1] == len(vocab.answers)


def test_with_place_facts_each_place_reads_one_fact_of_the_pair(qa19, qa1):
    """â_ij('x,y') = f([u; m_i; u ⊙ m_i])(x first) + g([u; m_j; u ⊙ m_j])(y second); a one-word
    answer reads the pair's first fact alone."""
    vocab, batch = qa19
    model = make(vocab, place_facts=True)
    p, answers, real = model.read(batch)
    m, u = model.sentences(batch)
    x = torch.cat([u[:, None].expand_as(m), m, u[:, None] * m], -1)  # (B, M, 3d)
    first = torch.relu(x @ model.f1 + model.f1_b) @ model.f2 + model.f2_b  # (B, M, W)
    second = torch.relu(x @ model.g1 + model.g1_b) @ model.g2 + model.g2_b
    words = sorted({w for a in vocab.answers for w in a.split(",")}) + [NONE]
    for a, answer in enumerate(vocab.answers):
        one, two = answer.split(",")
        expected = first[:, :, None, words.index(one)] + second[:, None, :, words.index(two)]
        assert torch.allclose(answers[..., a], expected, atol=1e-5), answer
    assert torch.allclose(p, make(vocab).read(batch)[0])  # the pairs' score is the same MLP's
    vocab, batch = qa1
    answers = make(vocab, place_facts=True).read(batch)[1]
    assert torch.allclose(answers, answers[:, :, :1].expand_as(answers))  # one place: fact j is not read
    with pytest.raises(ConfigError, match="model.place_facts: .* it needs model.places true, found false"):
        load(None, {"model.type": "pairs", "model.place_facts": True, "model.places": False})
    from memnet.report import describe
    assert describe(load(None, {"model.type": "pairs", "model.place_facts": True}))[1].endswith(
        "answer by places, each from one fact")


def test_supervision_adds_the_supporting_pairs_log_probability(qa19, qa1):
    """The loss adds w · −Σ log p(first fact, second fact); a one-fact question's pair is the fact with itself."""
    for vocab, batch in (qa19, qa1):
        plain, supervised = make(vocab), make(vocab, supervision=0.5)
        supervised.load_state_dict(plain.state_dict())
        p = plain.read(batch)[0]
        rows = torch.arange(len(batch))
        second = batch.support[:, 1] if batch.support.shape[1] > 1 else batch.support[:, 0]
        assert (batch.support[:, 0] >= 0).all() and (second >= 0).all()
        pair = p[rows, batch.support[:, 0], second]
        assert torch.allclose(supervised(batch).loss - plain(batch).loss, -0.5 * pair.log().sum(), rtol=1e-4)
    one_fact = qa1[1].support
    assert one_fact.shape[1] == 1  # qa1's pairs are a fact with itself


def test_learns_the_pairs_of_generated_qa19(tmp_path):
    """With supervision the reader finds both facts of a two-step path, though the start is
    named by several facts: on held-out questions each place picks its fact on most of them
    (a memory network's first hop cannot know which of the start's facts leads on)."""
    for split, size in (("train", 400), ("valid", 50), ("test", 100)):
        babi.write_file(tmp_path / babi.task_filename(19, split), generator.generate(19, size, seed=0, split=split))
    cfg = load(None, {"data.dir": str(tmp_path), "data.task": "19", "model.type": "pairs", "model.dim": 16,
                      "model.hidden": 32, "train.attention_supervision": 1.0, "train.lr": 0.0016,
                      "train.max_grad_norm": 1000.0, "train.random_noise": 0.0, "train.epochs": 30,
                      "train.eval_every": 10, "train.threads": 1})
    result = train(cfg, progress=False)
    assert isinstance(result["model"], PairReader)
    assert min(result["test"]["hop_accuracy"]) > 0.8, result["test"]["hop_accuracy"]


def test_a_restart_trains_the_same_whatever_ran_before(tmp_path):
    """The dropout draws from the model's own generator, seeded with its weights: two runs of one
    config in one process give the same model though torch's global generator has moved on, and
    the generator's state travels in the state dict (a resumed run draws what the uninterrupted one would)."""
    generator.write_dataset(tmp_path, 19, train=40, test=10, seed=0)
    cfg = load(None, {"data.dir": str(tmp_path), "data.task": "19", "model.type": "pairs", "model.dim": 8,
                      "model.hidden": 16, "train.epochs": 3, "train.eval_every": 1, "train.threads": 1})
    model = train(cfg, progress=False, log=False)["model"]
    first = model.state_dict()
    torch.rand(100)
    second = train(cfg, progress=False, log=False)["model"].state_dict()
    assert first.keys() == second.keys() and "_extra_state" in first
    assert all(torch.equal(first[k], second[k]) for k in first)
    model.noise.manual_seed(1)
    model.load_state_dict(first)
    assert torch.equal(model.noise.get_state(), first["_extra_state"])


def test_a_sentence_longer_than_the_masks_is_a_clear_error(qa19):
    vocab, batch = qa19
    with pytest.raises(MemnetError, match="a sentence has more than model.max_words = 3 words"):
        make(vocab, max_words=3)(batch)


def test_its_config_section_is_its_own():
    with pytest.raises(ConfigError, match="model.hops: a setting of model.type memn2n, not of pairs"):
        load(None, {"model.type": "pairs", "model.hops": 2})
    with pytest.raises(ConfigError, match="model.layers: a setting of model.type transformer and universal, not of pairs"):
        load(None, {"model.type": "pairs", "model.layers": 2})
    with pytest.raises(ConfigError, match=r"model.dropout: expected between 0 \(inclusive\) and 1, found 1.0"):
        load(None, {"model.type": "pairs", "model.dropout": 1})
    with pytest.raises(ConfigError, match="model.hidden: expected >= 1, found 0"):
        load(None, {"model.type": "pairs", "model.hidden": 0})
    cfg = load(None, {"model.type": "pairs", "model.places": "false"})
    assert cfg.model.places is False and cfg.model.max_words == 20


def test_train_eval_and_inspect_cli(tmp_path, capsys):
    model, cfg, text = through_the_cli(tmp_path, capsys, 19, ["--model.type=pairs", "--model.dim=8",
                                                              "--train.attention_supervision=1"], steps=2)
    assert isinstance(model, PairReader) and cfg.model.dim == 8 and cfg.train.attention_supervision == 1.0
    assert "fact 1" in text
