"""The transformer reader: the memory network's contract (shapes, attention rows sum to one,
padding gets none), the 1/sqrt(d_k) switch, its own config section, learning and the CLI."""
import json
import math

import pytest
import torch

from memnet import babi, checkpoint, generator
from memnet.cli import main
from memnet.config import ConfigError, load
from memnet.models import build_model
from memnet.models.transformer import Transformer, attention, saturation
from memnet.trainer import train


def make(vocab, seed=10, **fields):
    cfg = load(None, {f"model.{k}": v for k, v in {"type": "transformer", **fields}.items()})
    model = build_model(cfg, vocab)
    model.reset_parameters(torch.Generator().manual_seed(seed))
    return model


@pytest.mark.parametrize("fields", [{}, {"type": "universal", "stopping": True, "layers": 3}])
def test_shapes(qa1, fields):
    vocab, batch = qa1
    B, M = len(batch), batch.story.shape[1]
    L, A = fields.get("layers", 2), len(vocab.answers)
    reading = make(vocab, **fields).read(batch)
    r = reading.result
    assert r.logits.shape == (B, A) and r.attention.shape == (B, L, M) and r.hop_logits.shape == (B, L, A)
    assert r.hops_used.shape == r.halted.shape == (B,) and r.halt_probs.shape == (B, L) and r.loss.dim() == 0
    assert reading.heads.shape == reading.scores.shape == (B, L, 2, M)


def test_attention_rows_sum_to_one_and_padding_gets_none(qa1):
    vocab, batch = qa1
    reading = make(vocab).read(batch)
    slot = torch.arange(batch.story.shape[1])
    pad = slot >= batch.length[:, None]  # (B, M)
    assert pad.any() and (batch.length > 0).all()
    for weights in (reading.result.attention, reading.heads.flatten(1, 2)):  # (B, rows, M)
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:2]), atol=1e-5)
        assert (weights.masked_select(pad[:, None, :].expand_as(weights)) == 0).all()


def test_padding_changes_nothing(qa1, widened):
    """Extra padded memory slots and word columns leave every output as it was."""
    vocab, batch = qa1
    model = make(vocab)
    wider = widened(batch)
    a, b = model(batch), model(wider)
    assert torch.allclose(a.logits, b.logits, atol=1e-5)
    assert torch.allclose(a.attention, b.attention[..., : batch.story.shape[1]], atol=1e-6)
    assert (b.attention[..., batch.story.shape[1]:] == 0).all()


def test_attention_function_masks_exactly():
    q, k, v = torch.randn(3, 5, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 4)
    allowed = torch.rand(3, 5, 5) < 0.6
    allowed[..., 0] = True
    out, w, scores = attention(q, k, v, allowed)
    assert (w[~allowed] == 0).all() and torch.allclose(w.sum(-1), torch.ones(3, 5))
    assert torch.allclose(scores[allowed], (q @ k.transpose(-1, -2) / 2)[allowed])  # sqrt(d_k) = 2
    assert torch.allclose(out, w @ v)


def test_scale_switch_divides_scores_by_sqrt_dk(qa1):
    """Same weights with and without model.scale: the first layer's scores differ by sqrt(d_k)
    exactly, and the unscaled softmax is more peaked."""
    vocab, batch = qa1
    scaled = make(vocab, dim=32, heads=2)
    plain = make(vocab, dim=32, heads=2, scale=False)
    plain.load_state_dict(scaled.state_dict())
    a, b = scaled.read(batch), plain.read(batch)
    real = torch.arange(batch.story.shape[1]) < batch.length[:, None, None]  # (B, 1, M)
    sa, sb = a.scores[:, 0], b.scores[:, 0]  # (B, H, M) layer 1 sees the same inputs either way
    assert torch.allclose(sb.masked_select(real), sa.masked_select(real) * math.sqrt(16), atol=1e-4)
    assert not torch.allclose(sb.masked_select(real), sa.masked_select(real), atol=1e-3)
    assert saturation(b.heads[:, :1], batch.length)["mean_max_weight"] > saturation(a.heads[:, :1], batch.length)["mean_max_weight"]


def test_its_config_section_is_its_own():
    with pytest.raises(ConfigError, match="model.masking: a setting of model.type memn2n, not of transformer"):
        load(None, {"model.type": "transformer", "model.masking": "off"})
    with pytest.raises(ConfigError, match=r"model.heads: expected a divisor of model.dim \(20\), found 3"):
        load(None, {"model.type": "transformer", "model.heads": 3})
    assert load(None, {"model.type": "universal", "model.layers": 4}).model.layers == 4


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen")
    for split, size in (("train", 300), ("valid", 100), ("test", 200)):
        stories = generator.generate(1, size, seed=0, split=split)
        babi.write_file(out / babi.task_filename(1, split), stories)
    return out


def test_learns_generated_qa1(generated):
    """300 generated qa1 questions: well above chance (1/6) on held-out questions."""
    cfg = load(None, {"data.dir": str(generated), "data.task": "1", "model.type": "transformer",
                      "train.epochs": 20, "train.eval_every": 20, "train.linear_start_epochs": 0,
                      "train.threads": 1})
    result = train(cfg, progress=False)
    assert isinstance(result["model"], Transformer)
    assert result["test"]["accuracy"] > 0.5, result["test"]["accuracy"]


def test_train_and_eval_cli(generated, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--data", str(generated), "--task", "1", "--out", str(run), "--quiet",
                 "--config", "none", "--model.type=transformer", "--model.layers=3", "--train.epochs=1", "--train.threads=1"]) == 0
    trained = capsys.readouterr().out
    model, cfg, _, _ = checkpoint.load(run / "model.pt")
    assert isinstance(model, Transformer) and cfg.model.type == "transformer" and cfg.model.layers == 3
    assert main(["eval", "--checkpoint", str(run / "model.pt"), "--data", str(generated), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n"] == 200 and len(metrics["hop_accuracy"]) == 3
    # the test accuracy train reports is the saved model's on the test file (not the label alone)
    assert f"\ntest: accuracy {100 * metrics['accuracy']:.1f}%  " in trained
    # the question's attention per layer and head; the table's columns are their mean
    assert main(["inspect", "--checkpoint", str(run / "model.pt"), "--data", str(generated), "--heads", "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    heads = torch.tensor(table["heads"])  # (layers taken, heads, memories)
    assert heads.shape == (table["hops_used"], cfg.model.heads, len(table["memories"]))
    assert torch.allclose(heads.sum(-1), torch.ones(())) and torch.allclose(heads.mean(1), torch.tensor(table["attention"]), atol=1e-5)
    assert main(["inspect", "--checkpoint", str(run / "model.pt"), "--data", str(generated), "--heads"]) == 0
    # the per-head table: its header, then each memory's weight under each layer and head (the header alone
    # would pass "L1 H1")
    text = capsys.readouterr().out.splitlines()
    start = text.index("per head (the columns above average them):") + 1
    assert text[start].split() == ["id", *[w for k in range(heads.shape[0]) for h in range(heads.shape[1])
                                           for w in (f"L{k + 1}", f"H{h + 1}")]]
    for row, memory in enumerate(table["memories"]):
        cells = text[start + 1 + row].split()
        assert cells[0] == str(memory["id"])
        assert [float(c) for c in cells[1:]] == pytest.approx(heads[:, :, row].flatten().tolist(), abs=0.0051)


def test_a_memory_network_switch_for_a_transformer_is_a_clear_error(generated, tmp_path, capsys):
    args = ["train", "--data", str(generated), "--task", "1", "--out", str(tmp_path / "run"), "--quiet",
            "--config", "none", "--model.type=transformer", "--model.masking=hard", "--train.epochs=1"]
    assert main(args) == 2
    assert "model.masking: a setting of model.type memn2n, not of transformer" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    # from config.yaml: its memn2n section is refused, with the way out, and nothing is trained
    assert main(args[:-5] + ["--model.type=transformer", "--train.epochs=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memnet train: error: ") and err.count("\n") == 1
    assert err.endswith("(the model section of the config file is for another model.type: --config none starts from "
                        "the built-in defaults)\n")
    assert not (tmp_path / "run").exists()
