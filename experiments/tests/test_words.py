"""The word reader: the readers' contract (shapes, one read whose attention sums to one over the
real memories, padding changes nothing), its masked BiGRU against torch's GRU, the answer not
depending on the order of the facts but on which fact names which thing (learning generated
qa17), an ensemble of its restarts, its config section and the CLI."""
import dataclasses

import pytest
import torch

import memnet.trainer as train_module
from memnet import babi, checkpoint, generator
from memnet.config import ConfigError, load
from memnet.data import Vocab, encode_samples
from memnet.evaluation import accuracy, evaluate
from memnet.models import Ensemble, build_model
from experiments.readers.words import BiGRU, WordReader
from memnet.report import describe
from memnet.run import RunFolder
from memnet.trainer import train
from experiments.tests.conftest import through_the_cli


def make(vocab, seed=10, **fields):
    cfg = load(None, {f"model.{k}": v for k, v in {"type": "words", "dim": 8, "hidden": 16, **fields}.items()})
    model = build_model(cfg, vocab)
    model.reset_parameters(torch.Generator().manual_seed(seed))
    return model.eval()


def test_shapes_and_attention(qa1):
    vocab, batch = qa1
    B, M, A = len(batch), batch.story.shape[1], len(vocab.answers)
    r = make(vocab)(batch)
    assert r.logits.shape == (B, A) and r.attention.shape == (B, 1, M) and r.hop_logits.shape == (B, 1, A)
    assert (r.hops_used == 1).all() and not r.halted.any() and r.loss.dim() == 0
    assert torch.allclose(r.logits.exp().sum(-1), torch.ones(B), atol=1e-5)
    pad = torch.arange(M) >= batch.length[:, None]  # (B, M)
    assert pad.any()
    assert torch.allclose(r.attention.sum(-1), torch.ones(B, 1), atol=1e-5)
    assert (r.attention[:, 0][pad] == 0).all() and (r.attention[:, 0][~pad] > 0).all()
    answered = batch.answer >= 0
    expected = -r.logits[torch.arange(B), batch.answer].sum()
    assert answered.all() and torch.allclose(r.loss, expected)


def test_padding_changes_nothing(qa1, widened):
    """More empty memories, word columns and question columns: the same answers, to the float."""
    vocab, batch = qa1
    model = make(vocab)
    wider = widened(batch)
    wider = dataclasses.replace(wider, query=torch.nn.functional.pad(wider.query, (0, 3)))
    a, b = model(batch), model(wider)
    M = batch.story.shape[1]
    assert torch.allclose(a.logits, b.logits, atol=1e-5) and torch.allclose(a.loss, b.loss, rtol=1e-5)
    assert torch.allclose(a.attention, b.attention[..., :M], atol=1e-6) and (b.attention[..., M:] == 0).all()
    one = model(batch.index(torch.tensor([3])))  # and alone as in any batch
    assert torch.allclose(one.logits, a.logits[3:4], atol=1e-5)


def test_the_bigru_is_a_gru_each_way_over_the_real_words():
    """Forward: torch's GRU over the real words; backward: torch's GRU over them reversed; padding
    outputs zeros and changes neither."""
    torch.manual_seed(0)
    net = BiGRU(5, 4)
    x, n = torch.randn(3, 6, 5), torch.tensor([6, 4, 1])
    real = torch.arange(6) < n[:, None]
    out = net(x, real)
    assert out.shape == (3, 6, 8) and (out[~real] == 0).all()
    for cell, half in ((net.forward_cell, slice(0, 4)), (net.backward_cell, slice(4, 8))):
        gru = torch.nn.GRU(5, 4, batch_first=True)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(gru, name + "_l0").data.copy_(getattr(cell, name))
        for row, length in enumerate(n.tolist()):
            seq = x[row, :length]
            if half.start:  # the backward direction reads the words last to first
                expected = gru(seq.flip(0)[None])[0][0].flip(0)
            else:
                expected = gru(seq[None])[0][0]
            assert torch.allclose(out[row, :length, half], expected, atol=1e-6)


def test_the_answer_reads_which_fact_names_which_thing_not_their_order(qa1):
    """Swapping two facts' words changes the answer's input; swapping only their ages (the order
    the story told them in) changes nothing without the temporal encoding."""
    vocab, batch = qa1
    model = make(vocab, temporal=False)
    base = model(batch)
    swapped = dataclasses.replace(batch, time=batch.time.flip(-1))
    assert torch.allclose(model(swapped).logits, base.logits, atol=1e-5)
    timed = make(vocab, temporal=True)
    with torch.no_grad():
        timed.time.normal_()
    assert not torch.allclose(timed(swapped).logits, timed(batch).logits, atol=1e-3)


def test_the_summed_read_tells_a_fact_told_twice_from_once(qa1):
    """The attention's read is a mean: a story of one fact and of that fact twice read the same
    (without the temporal encoding). The summed read adds each word through its gate, so with it
    the second telling counts; padding still changes nothing."""
    vocab, batch = qa1
    first = batch.story[:, :1]
    once = dataclasses.replace(batch, story=first, length=torch.ones_like(batch.length), time=batch.time[:, :1])
    twice = dataclasses.replace(batch, story=torch.cat([first, first], 1), length=torch.full_like(batch.length, 2),
                                time=batch.time[:, :2])
    plain, summed = make(vocab, temporal=False), make(vocab, temporal=False, summed=True)
    assert torch.allclose(plain(once).logits, plain(twice).logits, atol=1e-5)
    assert not torch.allclose(summed(once).logits, summed(twice).logits, atol=1e-3)
    padded = dataclasses.replace(twice, story=torch.nn.functional.pad(twice.story, (0, 2, 0, 3)),
                                 time=torch.arange(5).expand(len(batch), -1))
    assert torch.allclose(summed(twice).logits, summed(padded).logits, atol=1e-5)
    assert summed.gate_bias.item() == -4.0 and not hasattr(plain, "gate_bias")


def test_with_summed_out_the_answer_reads_the_count_unsquashed(qa1):
    """The comparing GRU bounds what it passes on; with summed_out the answer's layer also reads
    the summed read itself: without the temporal encoding, a fact told k times gives k times what
    it gives told once. It needs the summed read."""
    vocab, batch = qa1
    first = batch.story[:, :1]
    model = make(vocab, temporal=False, summed=True, summed_out=True)
    seen = []
    model.out[0].register_forward_hook(lambda layer, inputs, output: seen.append(inputs[0]))
    for k in (1, 2, 3):
        model(dataclasses.replace(batch, story=first.repeat(1, k, 1), length=torch.full_like(batch.length, k),
                                  time=batch.time[:, :k]))
    d = model.dim
    assert [x.shape[-1] for x in seen] == [6 * d] * 3 and make(vocab, summed=True).out[0].in_features == 4 * d
    once, twice, thrice = (x[:, 4 * d:] for x in seen)
    assert once.abs().min() > 0
    assert torch.allclose(twice, 2 * once, atol=1e-5) and torch.allclose(thrice, 3 * once, atol=1e-5)
    assert seen[1][:, :4 * d].abs().max() <= 1  # the pooled comparison: a GRU's states, bounded
    with pytest.raises(ConfigError, match="model.summed_out: .* it needs model.summed true, found false"):
        make(vocab, summed_out=True)


def test_attention_supervision_pulls_each_sentence_gate_toward_the_supporting_facts(qa1):
    """With supporting facts the loss adds, per real sentence, the binary cross-entropy of its
    gate (its words' highest logit for any question word) toward [it is a supporting fact];
    padding adds nothing, and steps on it open the facts' gates more than the others'."""
    vocab, batch = qa1
    plain = make(vocab, summed=True)
    taught = build_model(load(None, {"model.type": "words", "model.dim": 8, "model.hidden": 16, "model.summed": True,
                                     "train.attention_supervision": 0.5}), vocab)
    taught.load_state_dict(plain.state_dict())
    taught.eval()
    B, M, J = batch.story.shape
    real = (batch.story != 0) & (torch.arange(M)[None, :, None] < batch.length[:, None, None])  # (B, M, J)
    facts = torch.zeros(B, M, dtype=torch.bool)
    for b in range(B):
        facts[b, batch.support[b][batch.support[b] >= 0]] = True

    def gates():  # (B, M) each sentence's gate logit, recomputed from the reader's parts
        q = taught.encode(taught.emb[batch.query], batch.query != 0)
        s = taught.encode(taught.emb[batch.story], real) + taught.time[batch.time][:, :, None] * real[..., None]
        logit = torch.einsum("btd,bmjd->btmj", q, s) + taught.gate_bias
        return logit.masked_fill(~real[:, None] | (batch.query == 0)[..., None, None], -100.0).amax(-1).amax(1)

    with torch.no_grad():
        bce = torch.nn.functional.binary_cross_entropy_with_logits(gates(), facts.float(), reduction="none")
        added = taught(batch).loss - plain(batch).loss
        padded = dataclasses.replace(batch, story=torch.nn.functional.pad(batch.story, (0, 2, 0, 3)),
                                     time=torch.arange(M + 3).expand(B, -1))
        assert float(taught(padded).loss) == pytest.approx(float(taught(batch).loss), rel=1e-5)
    assert facts.any() and float(added) == pytest.approx(0.5 * float(bce[real.any(-1)].sum()), rel=1e-4)
    # a question's padding (beside a longer question in a batch) opens no gate: its row of gate
    # logits, here high where every real word's is low, is not read
    Jq = batch.query.shape[1] + 1
    real_q = torch.ones(B, Jq, dtype=torch.bool)
    real_q[:, -1] = False
    opens = torch.full((B, Jq, M * J), -5.0)
    opens[:, -1] = 5.0
    low = torch.nn.functional.binary_cross_entropy_with_logits(torch.full((B, M), -5.0), facts.float(), reduction="none")
    assert float(taught.supervision(opens, real, real_q, batch)) == pytest.approx(float(low[real.any(-1)].sum()))
    unanswered = dataclasses.replace(batch, answer=torch.full_like(batch.answer, -1))  # the gates' loss alone
    with torch.no_grad():
        before = gates()
    step = torch.optim.SGD(taught.parameters(), lr=0.01)
    for _ in range(20):
        step.zero_grad()
        taught(unanswered).loss.backward()
        step.step()
    with torch.no_grad():
        moved = gates() - before
    sentences = real.any(-1)
    assert moved[facts].mean() > moved[sentences & ~facts].mean() + 0.5
    with pytest.raises(ConfigError, match="model.summed_out: .* it needs model.summed true"):
        make(vocab, summed_out=True)


def test_learns_generated_qa17(tmp_path):
    """Positions from two facts ('The triangle is to the left of the red sphere. The triangle is
    above the red square. Is the red square below the red sphere?'): the reader answers held-out
    questions (yes or no, about half each), where a reader of sentence vectors stays near chance
    on the official task."""
    for split, size in (("train", 600), ("valid", 100), ("test", 200)):
        babi.write_file(tmp_path / babi.task_filename(17, split), generator.generate(17, size, seed=0, split=split))
    cfg = load(None, {"data.dir": str(tmp_path), "data.task": "17", "model.type": "words", "model.dim": 16,
                      "model.hidden": 32, "train.lr": 0.02, "train.max_grad_norm": 40.0, "train.random_noise": 0.0,
                      "train.epochs": 40, "train.lr_decay_every": 20, "train.eval_every": 10, "train.threads": 1})
    result = train(cfg, progress=False, log=False)
    assert isinstance(result["model"], WordReader)
    assert result["test"]["accuracy"] > 0.75, result["test"]["accuracy"]  # 0.82 at this commit; chance: about 0.5


def test_dropout_draws_from_its_own_generator_and_only_in_training(qa1, tmp_path):
    """Without dropout a restart draws nothing more than before (its data order is unchanged) and
    training answers as evaluation; with it, training answers vary, evaluation does not, and two
    runs of one config give the same model though torch's global generator has moved on."""
    vocab, batch = qa1
    plain, dropping = make(vocab), make(vocab, dropout=0.3)
    g, g2 = torch.Generator().manual_seed(10), torch.Generator().manual_seed(10)
    plain.reset_parameters(g)
    dropping.reset_parameters(g2)
    assert torch.equal(plain.emb, dropping.emb)  # the same weights, then with dropout one number more:
    torch.randint(2**62, (), generator=g)
    assert torch.equal(g.get_state(), g2.get_state())
    assert torch.equal(plain.train()(batch).logits, plain.eval()(batch).logits)
    a, b = dropping.train()(batch).logits, dropping(batch).logits
    assert not torch.allclose(a, b)
    assert torch.equal(dropping.eval()(batch).logits, dropping(batch).logits)
    generator.write_dataset(tmp_path, 17, train=40, test=10, seed=0)
    cfg = load(None, {"data.dir": str(tmp_path), "data.task": "17", "model.type": "words", "model.dim": 8,
                      "model.hidden": 16, "model.dropout": 0.2, "train.epochs": 2, "train.eval_every": 1,
                      "train.threads": 1})
    first = train(cfg, progress=False, log=False)["model"].state_dict()
    torch.rand(100)
    second = train(cfg, progress=False, log=False)["model"].state_dict()
    assert first.keys() == second.keys() and "_extra_state" in first
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_an_ensemble_of_word_readers_keeps_the_restarts_best_on_valid(tmp_path):
    """With train.ensemble the word reader's run saves its k restarts best on valid (how qa17's
    column answers, docs/results.md), each at its best weights, and answers with their mean."""
    generator.write_dataset(tmp_path / "data", 17, train=60, test=20, seed=0)
    cfg = load(None, {"data.dir": str(tmp_path / "data"), "data.task": "17", "model.type": "words", "model.dim": 8,
                      "model.hidden": 16, "train.epochs": 3, "train.eval_every": 1, "train.threads": 1,
                      "train.restarts": 3, "train.ensemble": True, "train.ensemble_members": 2})
    result = train(cfg, RunFolder(tmp_path / "run"), progress=False, log=False)
    model, saved_cfg, vocab, _ = checkpoint.load(result["saved"])
    valid = train_module.load_data(saved_cfg, vocab)[0]["valid"]
    assert isinstance(model, Ensemble) and [type(m) for m in model.members] == [WordReader, WordReader]
    assert saved_cfg.train.restart_choice == "best"  # the built-in default: restarts ranked by their best valid accuracy
    assert [accuracy(member, valid) for member in model.members] == \
        pytest.approx(sorted(result["valid_accuracy_per_seed"], reverse=True)[:2])
    assert evaluate(model, valid)["accuracy"] == pytest.approx(result["valid"]["accuracy"])
    mean = torch.stack([m(valid).logits.softmax(-1) for m in model.members]).mean(0)
    assert torch.allclose(model(valid).logits.exp(), mean, atol=1e-6)


def test_a_list_answer_scores_its_items_outputs_beside_its_own(tmp_path):
    """model.list_answers: z('apple,milk') = y('apple,milk') + y('apple') + y('milk'), y the
    answer layer's output; a single item or 'nothing' keeps its own."""
    samples = list(babi.samples(generator.generate(8, 300, seed=0)))
    vocab = Vocab.build(samples)
    lists = [a for a in vocab.answers if "," in a]
    assert lists and "nothing" in vocab.answers  # the generator's qa8 has lists to score
    batch = encode_samples(samples[:5], vocab, memory_size=50)
    model = make(vocab, list_answers=True)
    bias = torch.randn(len(vocab.answers))
    with torch.no_grad():  # every question's output y is the last layer's bias alone
        model.out[2].weight.zero_()
        model.out[2].bias.copy_(bias)
    z = model(batch).logits[0].detach()
    y = dict(zip(vocab.answers, bias.tolist()))
    index = {a: i for i, a in enumerate(vocab.answers)}
    for answer in lists:
        want = y[answer] + sum(y[item] for item in answer.split(",")) - y["nothing"]
        assert float(z[index[answer]] - z[index["nothing"]]) == pytest.approx(want, abs=1e-5)
    single = next(a for a in vocab.answers if "," not in a and a != "nothing")
    assert float(z[index[single]] - z[index["nothing"]]) == pytest.approx(y[single] - y["nothing"], abs=1e-5)
    plain = make(vocab)
    plain.load_state_dict(model.state_dict())
    assert plain.list_parts is None and not torch.allclose(plain(batch).logits, model(batch).logits)


LISTS = """\
1 Mary got the milk there.
2 Mary got the apple there.
3 What is Mary carrying?\tmilk,apple\t1 2
1 John got the apple there.
2 John went to the garden.
3 John got the milk there.
4 What is John carrying?\tapple,milk\t1 3
5 John dropped the milk.
6 What is John carrying?\tapple\t1 3 5
"""


def test_list_order_gives_a_set_of_items_the_order_the_open_facts_name_them_in():
    """model.list_order: at inference the probability of 'apple,milk' and 'milk,apple' goes to
    the order in which the open sentences first name the two; training, a single answer, and a
    story whose sentences the gates all shut keep the answer layer's distribution."""
    samples = list(babi.samples(babi.parse_lines(LISTS.splitlines())))
    vocab = Vocab.build(samples)
    batch = encode_samples(samples, vocab, memory_size=50)
    model = make(vocab, summed=True, list_order=True)
    index = {a: i for i, a in enumerate(vocab.answers)}
    bias = torch.zeros(len(vocab.answers))
    bias[index["apple,milk"]], bias[index["milk,apple"]], bias[index["apple"]] = 3.0, 1.0, 2.0
    with torch.no_grad():  # every question's output is the bias alone, every sentence's gate open
        model.out[2].weight.zero_()
        model.out[2].bias.copy_(bias)
        model.gate_bias.fill_(100.0)
    plain = bias.log_softmax(-1)
    pair = plain[[index["apple,milk"], index["milk,apple"]]].exp().sum()
    z = model(batch).logits.detach()
    assert z[0, index["milk,apple"]].exp() == pytest.approx(float(pair)) and z[0, index["apple,milk"]] < -60
    assert z[1, index["apple,milk"]].exp() == pytest.approx(float(pair)) and z[1, index["milk,apple"]] < -60
    for r in range(3):
        assert float(z[r, index["apple"]]) == pytest.approx(float(plain[index["apple"]]))
    model.train()
    assert torch.allclose(model(batch).logits, plain.expand(3, -1), atol=1e-6)  # training: unchanged
    model.eval()
    with torch.no_grad():
        model.gate_bias.fill_(-100.0)  # no sentence open: no order to go by
    assert torch.allclose(model(batch).logits, plain.expand(3, -1), atol=1e-6)
    with pytest.raises(ConfigError, match="model.list_order: .* needs model.summed true, found false"):
        load(None, {"model.type": "words", "model.list_order": True})


def test_its_config_section_is_its_own():
    with pytest.raises(ConfigError, match="model.hops: a setting of model.type memn2n, not of words"):
        load(None, {"model.type": "words", "model.hops": 2})
    with pytest.raises(ConfigError, match="model.hidden: expected >= 1, found 0"):
        load(None, {"model.type": "words", "model.hidden": 0})
    with pytest.raises(ConfigError, match="train.attention_supervision: the word reader .* needs model.summed true"):
        load(None, {"model.type": "words", "train.attention_supervision": 1.0})
    cfg = load(None, {"model.type": "words", "model.temporal": "false"})
    assert cfg.model.temporal is False and cfg.model.dim == 32
    assert describe(cfg) == (1, "words, d=32, 64 hidden")


def test_train_eval_and_inspect_cli(tmp_path, capsys):
    model, cfg, text = through_the_cli(tmp_path, capsys, 17, ["--model.type=words", "--model.dim=8"], steps=1)
    assert isinstance(model, WordReader) and cfg.model.dim == 8
    assert "read 1" in text
