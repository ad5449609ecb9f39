"""Two readers mixed by a gate over the question's words (experiments/readers/mix.py, mix_readers.py):
the gate learns from the question's words which reader is right, the mixture of two equal readers
is that reader, the cross-fitted error scores each question with a gate that did not see it, and
mix_readers writes the bench's records of two joint runs' mixture, one per task and seed set."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import shutil

import pytest
import torch

from experiments.readers import mix as mixture
from experiments.readers.mix import main as mix_main
from experiments.tests.conftest import PLUGIN_ENV
from experiments.readers.mixture import Mixture, recent, word_map
from memnet import checkpoint, generator
from memnet.cli import main
from memnet.data import Vocab, encode_tasks, read_splits
from memnet.evaluation import predict

ROOT = Path(__file__).resolve().parents[2]


def mix_readers(*args: str) -> subprocess.CompletedProcess:
    """experiments/readers/mix_readers.py as a user runs it, from the repository root."""
    return subprocess.run([sys.executable, "-m", "experiments.readers.mix_readers", *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, **PLUGIN_ENV})


def confident(right: torch.Tensor, answer: torch.Tensor, n_answers: int = 3) -> torch.Tensor:
    """(N, A) log-probabilities: 0.9 on the answer where `right`, else 0.9 on the next class."""
    target = torch.where(right, answer, (answer + 1) % n_answers)
    p = torch.full((len(answer), n_answers), 0.1 / (n_answers - 1))
    p[torch.arange(len(answer)), target] = 0.9
    return p.log()


def two_kinds(n=200, seed=0):
    """Questions of two kinds (word 2 or word 3 in the question): reader A is right on the first,
    reader B on the second."""
    g = torch.Generator().manual_seed(seed)
    kind = torch.arange(n) % 2 == 0
    x = torch.zeros(n, 5)
    x[kind, 2] = 1
    x[~kind, 3] = 1
    x[:, 4] = 1  # a word every question has
    answer = torch.randint(3, (n,), generator=g)
    return x, confident(kind, answer), confident(~kind, answer), answer, kind


def test_the_gate_learns_from_the_question_words_which_reader_is_right():
    x, a, b, answer, kind = two_kinds()
    gate = mixture.Gate(5).fit(x, a, b, answer)
    share = gate.share(x)
    assert (share[kind] > 0.9).all() and (share[~kind] < 0.1).all()
    assert (gate.mix(x, a, b).argmax(-1) == answer).all()  # each reader alone: half wrong
    assert (a.argmax(-1) != answer).float().mean() == 0.5


def test_the_mixture_is_a_distribution_and_of_equal_readers_that_reader():
    x, a, b, answer, _ = two_kinds()
    gate = mixture.Gate(5).fit(x, a, b, answer)
    assert torch.allclose(gate.mix(x, a, b).exp().sum(-1), torch.ones(len(x)), atol=1e-5)
    assert torch.allclose(gate.mix(x, a, a), a, atol=1e-5)
    zero = mixture.Gate(5)  # g = 1/2 before fitting
    assert torch.allclose(zero.mix(x, a, b).exp(), (a.exp() + b.exp()) / 2, atol=1e-6)
    # where reader A is always the better, nothing bounds g below 1: fitted long, σ rounds to 1
    one, first = torch.ones(50, 1), torch.zeros(50, dtype=torch.long)
    better, worse = torch.tensor([[0.99, 0.01]]).log().expand(50, 2), torch.tensor([[0.3, 0.7]]).log().expand(50, 2)
    sure = mixture.Gate(1).fit(one, better, worse, first, steps=2000, lr=2.0, l2=0.0)
    assert torch.isfinite(sure.w).all() and sure.share(one).min() > 0.999
    assert torch.allclose(sure.mix(one, better, worse), better, atol=1e-3)


def test_with_confidence_the_gate_reads_how_sure_each_reader_is():
    """Every question has the same words. On half, A is right and sure (0.99) and B wrong (0.9);
    on the other half A is wrong and less sure (0.7), B right (0.6). No one share g answers both
    halves (the first needs g > 0.48, the second g < 0.47), so the gate over the words alone gets
    about half wrong; reading the readers' top probabilities it answers every question right."""
    n = 200
    g = torch.Generator().manual_seed(2)
    right_a = torch.rand(n, generator=g) < 0.5
    answer = torch.randint(3, (n,), generator=g)

    def reader(right, sure_right, sure_wrong):
        top = torch.where(right, sure_right, sure_wrong)
        p = ((1 - top) / 2)[:, None].repeat(1, 3)
        p[torch.arange(n), torch.where(right, answer, (answer + 1) % 3)] = top
        return p.log()

    a, b = reader(right_a, 0.99, 0.7), reader(~right_a, 0.6, 0.9)
    words = torch.ones(n, 1)
    plain = mixture.Gate(1).fit(words, a, b, answer, steps=1000, lr=0.5, l2=0.0)
    assert 0.3 < (plain.mix(words, a, b).argmax(-1) != answer).float().mean() < 0.7
    x = torch.cat([words, mixture.confidences(a, b)], dim=1)
    assert torch.allclose(x[:, 1], torch.where(right_a, 0.99, 0.7)) and torch.allclose(x[:, 2], torch.where(right_a, 0.9, 0.6))
    sure = mixture.Gate(3).fit(x, a, b, answer, steps=1000, lr=0.5, l2=0.0)
    assert (sure.mix(x, a, b).argmax(-1) == answer).all()


def test_question_words_leave_out_padding_and_unknown_words():
    class Questions:  # what question_words reads of a Batch
        query = torch.tensor([[5, 3, 1, 0], [2, 2, 0, 0]])  # word ids; 0 padding, 1 <unk>

        def __len__(self):
            return 2

    x = mixture.question_words(Questions(), 6)
    assert x.tolist() == [[0, 0, 0, 1, 0, 1], [0, 0, 1, 0, 0, 0]]


def test_the_crossfitted_error_is_scored_by_a_gate_that_did_not_see_the_question():
    """Where which reader is right follows no word, a gate fitted on the questions themselves
    can still learn them one by one (each question has its own word); fitted on the other half it
    cannot, and about half are wrong."""
    n = 200
    g = torch.Generator().manual_seed(1)
    right_a = torch.rand(n, generator=g) < 0.5
    x = torch.eye(n)  # each question its own word: nothing carries over to another question
    answer = torch.randint(3, (n,), generator=g)
    a, b = confident(right_a, answer), confident(~right_a, answer)
    tasks = torch.ones(n, dtype=torch.long)
    fitted = mixture.Gate(n).fit(x, a, b, answer, steps=300, lr=0.5, l2=0.0)
    assert (fitted.mix(x, a, b).argmax(-1) != answer).float().mean() < 0.05
    wrong = mixture.crossfit_wrong(x, a, b, answer, tasks)
    assert 0.35 < wrong.float().mean() < 0.65


def test_a_cascade_is_cross_fitted_with_its_inner_gate_fitted_on_the_other_half_too():
    """Reader A a mixture whose gate learnt the valid questions one by one: taken as fitted, the
    cascade looks right everywhere; with A's gate fitted on the other half too, about half are wrong."""
    n = 200
    g = torch.Generator().manual_seed(2)
    right_a = torch.rand(n, generator=g) < 0.5
    x = torch.eye(n)  # each question its own word
    answer = torch.randint(3, (n,), generator=g)
    a, b = confident(right_a, answer), confident(~right_a, answer)
    fitted = mixture.Gate(n).fit(x, a, b, answer, steps=300, lr=0.5, l2=0.0).mix(x, a, b)
    c = confident(torch.zeros(n, dtype=torch.bool), answer)  # reader C: always wrong
    tasks, outer = torch.ones(n, dtype=torch.long), torch.ones(n, 1)
    assert mixture.crossfit_wrong(outer, fitted, c, answer, tasks).float().mean() < 0.05
    honest = mixture.crossfit_wrong(outer, fitted, c, answer, tasks, inner=[(x, a, b)])
    assert 0.35 < honest.float().mean() < 0.65


def test_a_cascade_of_three_gates_refits_both_inner_gates_on_the_other_half():
    """Reader A a cascade, (A ⊕ B) ⊕ C, whose innermost gate learnt the valid questions one by
    one: taken as fitted, ((A ⊕ B) ⊕ C) ⊕ D looks right everywhere; with both inner gates fitted
    on the other half too, about half are wrong."""
    n = 200
    g = torch.Generator().manual_seed(3)
    right_a = torch.rand(n, generator=g) < 0.5
    x = torch.eye(n)
    answer = torch.randint(3, (n,), generator=g)
    a, b = confident(right_a, answer), confident(~right_a, answer)
    never = confident(torch.zeros(n, dtype=torch.bool), answer)  # readers C and D: always wrong
    tasks, outer = torch.ones(n, dtype=torch.long), torch.ones(n, 1)
    ab = mixture.Gate(n).fit(x, a, b, answer, steps=300, lr=0.5, l2=0.0).mix(x, a, b)
    abc = mixture.Gate(1).fit(outer, ab, never, answer).mix(outer, ab, never)
    assert mixture.crossfit_wrong(outer, abc, never, answer, tasks).float().mean() < 0.05
    # the outer inner gate alone refitted, over A ⊕ B as fitted: still right everywhere
    assert mixture.crossfit_wrong(outer, abc, never, answer, tasks, inner=[(outer, ab, never)]).float().mean() < 0.05
    honest = mixture.crossfit_wrong(outer, abc, never, answer, tasks, inner=[(x, a, b), (outer, never)])
    assert honest.float().mean() > 0.35


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A joint memory network (each answer phrase a word of its own) and a joint word reader on
    generated qa1 and qa19 (paths: answers such as 'n,e')."""
    root = tmp_path_factory.mktemp("two_runs")
    data = root / "data"
    for task in (1, 19):
        generator.write_dataset(data, task, train=60, test=20, seed=0)
    runs = {"mn": ["--model.dim=8", "--train.epochs=2", "--model.phrase_answers=true"],
            "words": ["--model.type=words", "--model.dim=8", "--model.hidden=8", "--train.epochs=1"]}
    for name, flags in runs.items():
        assert main(["train", "--data", str(data), "--task", "1,19", "--out", str(root / name), "--quiet",
                     "--config", "none", "--model.dim=8", "--train.epochs=2", *flags]) == 0
    return root


def test_mix_readers_writes_the_bench_records_of_the_mixture_once_per_seed_set(two_runs, tmp_path, capsys):
    runs = {}
    for name in ("mn", "words"):  # as memnet bench --runs keeps them: PRESET-joint/set-K
        runs[name] = tmp_path / f"{name}-joint"
        shutil.copytree(two_runs / name, runs[name] / "set-0")
    unfinished = runs["mn"] / "set-1"  # a run still training: a model so far, no test metrics yet
    shutil.copytree(two_runs / "mn", unfinished)
    lines = (unfinished / "metrics.jsonl").read_text().splitlines()
    (unfinished / "metrics.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    shutil.copytree(unfinished, runs["words"] / "set-1")
    stopped = runs["mn"] / "set-2"  # a run stopped early: the weights it had, evaluated on test, say so
    shutil.copytree(two_runs / "mn", stopped)
    *lines, last = (stopped / "metrics.jsonl").read_text().splitlines()
    (stopped / "metrics.jsonl").write_text("\n".join([*lines, json.dumps({**json.loads(last), "interrupted": True})]) + "\n")
    shutil.copytree(two_runs / "words", runs["words"] / "set-2")
    others = mix_readers(str(runs["mn"]), str(runs["words"]), "--out", str(tmp_path / "bench"), "--first-set", "1",
                         "--sets", "5")  # set 0 left out, set 1 unfinished, set 2 stopped: nothing to mix
    assert others.returncode == 2 and "hold no run of the same seed set (and task) both among seed sets 1-5" in others.stderr
    assert not (tmp_path / "bench").exists()
    out = mix_readers(str(runs["mn"]), str(runs["words"]), "--out", str(tmp_path / "bench"), "--name", "joint-mix",
                      "--first-set", "0")
    assert out.returncode == 0, out.stderr
    path = tmp_path / "bench" / "records.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["task"], r["set"], r["preset"], r["joint"]) for r in records] == [(1, 0, "joint-mix", [1, 19]),
                                                                              (19, 0, "joint-mix", [1, 19])]
    for r in records:
        assert r["test_questions"] == 20 and 0 <= r["test_error"] <= 1 and 0 <= r["crossfit_valid_error"] <= 1
        assert math.isclose(r["test_error"] * 20, round(r["test_error"] * 20), abs_tol=1e-6)
        assert 0 < r["share_a"] < 1 and r["readers"]["a"]["run"] == str(runs["mn"] / "set-0")
        assert r["readers"]["b"]["runs"] == "words-joint" and len(r["preset_hash"]) == 64
    assert "set 0: mean test error" in out.stdout
    assert main(["bench", "--table", str(path)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("joint-mix (") and "for the 2 tasks together (joint)" in table.splitlines()[0]
    again = mix_readers(str(runs["mn"]), str(runs["words"]), "--out", str(tmp_path / "bench"), "--name", "joint-mix")
    assert again.returncode == 0 and "set 0: recorded" in again.stdout
    assert len(path.read_text().splitlines()) == 2


def test_mix_readers_mixes_runs_trained_per_task_task_by_task(tmp_path):
    data = tmp_path / "data"
    generator.write_dataset(data, 1, train=60, test=20, seed=0)
    runs = {"mn": ["--model.dim=8"], "words": ["--model.type=words", "--model.dim=8", "--model.hidden=8"]}
    for name, flags in runs.items():  # as memnet bench --runs keeps a per-task preset's runs: PRESET/set-K/qaT
        assert main(["train", "--data", str(data), "--task", "1", "--out", str(tmp_path / name / "set-0" / "qa1"),
                     "--quiet", "--config", "none", "--train.epochs=1", *flags]) == 0
    out = mix_readers(str(tmp_path / "mn"), str(tmp_path / "words"), "--out", str(tmp_path / "bench"))
    assert out.returncode == 0, out.stderr
    [r] = [json.loads(line) for line in (tmp_path / "bench" / "records.jsonl").read_text().splitlines()]
    assert (r["task"], r["set"], r["preset"], "joint" in r) == (1, 0, "mix", False)
    assert (r["readers"]["a"]["runs"], r["readers"]["b"]["runs"]) == ("mn", "words")
    assert "set 0 qa1: mean test error" in out.stdout


def test_word_map_reads_one_vocabulary_in_the_other():
    a = Vocab(["<pad>", "<unk>", "apple", "n,e", "john"], ["apple", "n,e"])  # a phrase word B lacks
    b = Vocab(["<pad>", "<unk>", "apple", "john"], ["apple", "n,e"])
    assert word_map(a, b).tolist() == [0, 1, 2, 1, 3]


def test_mix_writes_one_model_that_eval_inspect_and_ask_load(two_runs, tmp_path, capsys):
    """The mixture's answers are the gate's mix of each reader's answers on its own encoding of the
    questions (reader B's vocabulary differs from A's), and eval, inspect and ask load it."""
    out = tmp_path / "mix"
    assert mix_main([str(two_runs / "mn"), str(two_runs / "words"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mean" in printed and f"wrote {out / 'model.pt'}" in printed
    record = json.loads((out / "metrics.jsonl").read_text())
    assert [r["task"] for r in record["tasks"]] == ["1", "19"] and record["readers"] == ["memn2n", "words"]

    model, cfg, vocab, _ = checkpoint.load(out / "model.pt")
    assert isinstance(model, mixture.Mixture) and cfg.model.type == "mixture"
    a, b = mixture.load_pair(two_runs / "mn", two_runs / "words")
    assert a.vocab.itos != b.vocab.itos  # the memory network's phrase answers are words of its own
    splits = read_splits(cfg.data.dir, [1, 19], cfg.data.valid_fraction)
    test_a = encode_tasks(splits["test"], a.vocab, cfg.data.memory_size)
    test_b = encode_tasks(splits["test"], b.vocab, cfg.data.memory_size)
    lp_a, lp_b = predict(a.model, test_a).logits.log_softmax(-1), predict(b.model, test_b).logits.log_softmax(-1)
    gate = mixture.Gate(len(vocab))
    gate.w, gate.c = model.gate_w, model.gate_c
    result = predict(model, test_a)
    assert torch.allclose(result.logits, gate.mix(mixture.question_words(test_a, len(vocab)), lp_a, lp_b), atol=1e-5)
    assert not torch.allclose(lp_a, lp_b, atol=1e-3) and (gate.w != 0).any()  # two readers, a fitted gate

    assert main(["eval", "--checkpoint", str(out), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    wrong = (result.logits.argmax(-1) != test_a.answer).float().mean()
    assert math.isclose(m["error"], float(wrong), abs_tol=1e-6) and 0 < m["share_a"] < 1
    assert main(["inspect", "--checkpoint", str(out), "--task", "19", "--index", "0"]) == 0
    assert "readers: memn2n" in capsys.readouterr().out
    story = tmp_path / "story.txt"
    sample = splits["test"][1][0]  # its supporting fact alone: a story that mentions whom the question asks about
    story.write_text(sample.facts[sample.support_positions[0]].text.join(["1 ", ".\n"]) + "2 " + sample.question.text + "\n")
    assert main(["ask", "--checkpoint", str(out), "--story", str(story)]) == 0
    assert "readers: memn2n" in capsys.readouterr().out


def test_a_mixture_whose_gate_reads_confidence_loads_and_mixes_as_fitted(two_runs, tmp_path, capsys):
    out = tmp_path / "mix"
    assert mix_main([str(two_runs / "mn"), str(two_runs / "words"), "--out", str(out), "--confidence"]) == 0
    capsys.readouterr()
    model, cfg, vocab, _ = checkpoint.load(out / "model.pt")
    assert cfg.model.confidence and model.confidence and model.gate_w.shape == (len(vocab) + 2,)
    a, b = mixture.load_pair(two_runs / "mn", two_runs / "words")
    splits = read_splits(cfg.data.dir, [1, 19], cfg.data.valid_fraction)
    test_a = encode_tasks(splits["test"], a.vocab, cfg.data.memory_size)
    test_b = encode_tasks(splits["test"], b.vocab, cfg.data.memory_size)
    lp_a, lp_b = predict(a.model, test_a).logits.log_softmax(-1), predict(b.model, test_b).logits.log_softmax(-1)
    gate = mixture.Gate(len(vocab) + 2)
    gate.w, gate.c = model.gate_w, model.gate_c
    x = mixture.gate_inputs(test_a, len(vocab), lp_a, lp_b, True)
    assert torch.allclose(predict(model, test_a).logits, gate.mix(x, lp_a, lp_b), atol=1e-5)
    assert (gate.w[-2:] != 0).all()  # the fit moved the confidences' weights
    for name in ("mn", "words"):
        shutil.copytree(two_runs / name, tmp_path / f"{name}-joint" / "set-0")
    hashes = []  # the gate over the words alone and with confidence: two presets, two hashes
    for flags in ([], ["--confidence"]):
        bench_out = tmp_path / f"bench{len(flags)}"
        done = mix_readers(str(tmp_path / "mn-joint"), str(tmp_path / "words-joint"), "--out", str(bench_out), *flags)
        assert done.returncode == 0, done.stderr
        hashes.append({json.loads(line)["preset_hash"] for line in (bench_out / "records.jsonl").read_text().splitlines()})
    assert len(hashes[0]) == len(hashes[1]) == 1 and hashes[0] != hashes[1]


def test_mix_refuses_and_writes_nothing(two_runs, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "model.pt").write_bytes(b"another run")
    assert mix_main([str(two_runs / "mn"), str(two_runs / "words"), "--out", str(taken)]) == 2
    assert "holds another run" in capsys.readouterr().err and (taken / "model.pt").read_bytes() == b"another run"
    assert mix_main([str(two_runs / "mn"), str(two_runs / "words"), "--out", str(two_runs / "mn"), "--force"]) == 2
    assert "own run folder" in capsys.readouterr().err and checkpoint.load(two_runs / "mn" / "model.pt")
    assert mix_main([str(two_runs / "mn"), str(tmp_path / "nothing"), "--out", str(tmp_path / "new")]) == 2
    assert "no such checkpoint file" in capsys.readouterr().err and not (tmp_path / "new").exists()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.pt").write_text("not a checkpoint\n")
    assert mix_main([str(two_runs / "mn"), str(broken), "--out", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err
    assert f"{broken / 'model.pt'}: not a readable memnet checkpoint" in err and "Traceback" not in err
    assert not (tmp_path / "new").exists()
    mix = tmp_path / "mix"  # a mixture is not a reader B (as reader A it is a cascade)
    assert mix_main([str(two_runs / "mn"), str(two_runs / "words"), "--out", str(mix)]) == 0
    capsys.readouterr()
    assert mix_main([str(two_runs / "words"), str(mix), "--out", str(tmp_path / "new")]) == 2
    assert "already a mixture of two readers" in capsys.readouterr().err and not (tmp_path / "new").exists()
    (mix / "last.pt").write_bytes(b"a file of the run that held the folder")  # --force replaces that run's files
    assert mix_main([str(two_runs / "mn"), str(two_runs / "words"), "--out", str(mix), "--force"]) == 0
    assert not (mix / "last.pt").exists() and checkpoint.load(mix / "model.pt")


def test_mix_readers_refuses_runs_of_different_tasks(tmp_path):
    data = tmp_path / "data"
    for task in (1, 17):
        generator.write_dataset(data, task, train=40, test=10, seed=0)
    for name, tasks in (("a", "1,17"), ("b", "1")):
        assert main(["train", "--data", str(data), "--task", tasks, "--out", str(tmp_path / name), "--quiet",
                     "--config", "none", "--model.dim=8", "--train.epochs=1"]) == 0
    out = mix_readers(str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "mix"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "was trained on tasks 1,17" in out.stderr and not (tmp_path / "mix" / "records.jsonl").exists()


def test_recent_is_the_batch_encoded_with_fewer_memories(tmp_path):
    data = tmp_path / "data"
    generator.write_dataset(data, 2, train=20, test=10, seed=0)  # stories longer than 4 facts, facts beyond them
    samples = read_splits(data, [2], 0.1)["test"]
    vocab = Vocab.build(s for ss in samples.values() for s in ss)
    wide, narrow = encode_tasks(samples, vocab, 50), encode_tasks(samples, vocab, 4)
    cut = recent(wide, 4)
    assert (wide.length > 4).any() and (wide.support >= 4).any()
    j = narrow.story.shape[2]
    assert torch.equal(cut.story[..., :j], narrow.story) and not cut.story[..., j:].any()
    for name in ("query", "length", "answer", "support", "n_support", "task", "time"):
        assert torch.equal(getattr(cut, name), getattr(narrow, name)), name
    assert recent(narrow, 50) is narrow


@pytest.fixture(scope="module")
def three_per_task(tmp_path_factory):
    """Per-task runs of qa19 as memnet bench --runs keeps them (PRESET/set-0/qa19): a memory
    network, a word reader and a pair reader that keeps 5 memories; the pair reader's preset file."""
    root = tmp_path_factory.mktemp("three")
    data = root / "data"
    generator.write_dataset(data, 19, train=60, test=20, seed=0)
    pairs = root / "pairs.yaml"
    pairs.write_text("data:\n  memory_size: 5\nmodel:\n  type: pairs\n  dim: 8\n  hidden: 8\n"
                     "train:\n  epochs: 1\n  linear_start_epochs: 0\n")
    runs = {"mn": ["--config", "none", "--model.dim=8"],
            "words": ["--config", "none", "--model.type=words", "--model.dim=8", "--model.hidden=8"],
            "pairs": ["--config", str(pairs)]}
    for name, flags in runs.items():
        assert main(["train", "--data", str(data), "--task", "19", "--out", str(root / name / "set-0" / "qa19"),
                     "--quiet", "--train.epochs=1", *flags]) == 0
    return root, pairs


def test_a_cascade_mixes_the_mixture_with_reader_c_where_it_is_above_the_threshold(three_per_task, tmp_path):
    """--then: a task above --above on valid (cross-fitted) waits for reader C's run, then is
    mixed again with it, (A + B) + C; a task below is the mixture of A and B, with the cascade's hash."""
    root, pairs = three_per_task
    runs_c = tmp_path / "pairs"
    cascade = [str(root / "mn"), str(root / "words"), "--then", str(runs_c), "--then-config", str(pairs)]
    waits = mix_readers(*cascade, "--above", "-1", "--out", str(tmp_path / "above"))  # every task above -1
    assert waits.returncode == 0, waits.stderr
    assert "set 0 qa19: above -100% on valid: waits for reader C's run" in waits.stdout
    assert f"--tasks 19 --sets 1 --first-set 0" in waits.stdout and f"--runs {tmp_path}" in waits.stdout
    assert not (tmp_path / "above" / "records.jsonl").exists()
    shutil.copytree(root / "pairs", runs_c)  # reader C trained where it was wanted
    done = mix_readers(*cascade, "--above", "-1", "--out", str(tmp_path / "above"))
    assert done.returncode == 0, done.stderr
    [r] = [json.loads(line) for line in (tmp_path / "above" / "records.jsonl").read_text().splitlines()]
    assert r["readers"]["c"]["run"] == str(runs_c / "set-0" / "qa19") and r["cascade"]["above"] == -1
    assert {"test_error_ab", "test_error_c", "crossfit_valid_error_ab"} <= set(r["cascade"])
    a, b = mixture.load_pair(root / "mn" / "set-0" / "qa19", root / "words" / "set-0" / "qa19")
    c = mixture.load_reader(runs_c / "set-0" / "qa19")
    cfg = a.cfg
    splits = read_splits(cfg.data.dir, [19], cfg.data.valid_fraction)
    valid, test = (encode_tasks(splits[s], a.vocab, cfg.data.memory_size) for s in ("valid", "test"))
    ab, _, _ = mixture.fit(a, b, valid, [19])
    abc, _, _ = mixture.fit(mixture.as_reader(ab, a, b), c, valid, [19])
    assert abc.memory_b == 5 and isinstance(abc.a, Mixture)
    c_alone = predict(c.model, encode_tasks(splits["test"], c.vocab, 5)).logits.log_softmax(-1)
    z = abc.gate(test, predict(ab, test).logits.log_softmax(-1), c_alone)
    expected = mixture.mixed(z, predict(ab, test).logits.log_softmax(-1), c_alone)
    wrong = (expected.argmax(-1) != test.answer).float().mean()
    assert math.isclose(r["test_error"], float(wrong), abs_tol=1e-6)
    assert math.isclose(r["cascade"]["test_error_c"], float((c_alone.argmax(-1) != test.answer).float().mean()),
                        abs_tol=1e-6)
    below = mix_readers(*cascade, "--above", "1", "--out", str(tmp_path / "below"))  # no task above 100%
    plain = mix_readers(str(root / "mn"), str(root / "words"), "--out", str(tmp_path / "plain"))
    assert below.returncode == plain.returncode == 0
    [low] = [json.loads(line) for line in (tmp_path / "below" / "records.jsonl").read_text().splitlines()]
    [two] = [json.loads(line) for line in (tmp_path / "plain" / "records.jsonl").read_text().splitlines()]
    assert low["test_error"] == two["test_error"] and "c" not in low["readers"] and "cascade" not in two
    assert low["preset_hash"] != two["preset_hash"] != r["preset_hash"] != low["preset_hash"]


def test_a_second_then_mixes_a_fourth_reader_where_the_cascade_is_still_above(three_per_task, tmp_path):
    """--then twice: a task above --above after (A + B) + C waits for reader D's run, then is
    ((A + B) + C) + D, every gate fitted on valid; its record holds the three-reader cascade's
    test error, which the cascade alone records as its own, and D's alone."""
    root, pairs = three_per_task
    items = tmp_path / "items.yaml"
    items.write_text("model:\n  type: items\n  dim: 8\n  hidden: 8\ntrain:\n  epochs: 1\n")
    runs_d = tmp_path / "items"
    three = [str(root / "mn"), str(root / "words"), "--then", str(root / "pairs"), "--then-config", str(pairs)]
    four = [*three, "--then", str(runs_d), "--then-config", str(items)]
    waits = mix_readers(*four, "--above", "-1", "--out", str(tmp_path / "four"))
    assert waits.returncode == 0, waits.stderr
    assert "set 0 qa19: above -100% on valid: waits for reader D's run" in waits.stdout
    assert "train reader D on these tasks" in waits.stdout and f"--runs {tmp_path}" in waits.stdout
    assert f"--out {tmp_path / 'four' / 'reader-d'}" in waits.stdout
    assert not (tmp_path / "four" / "records.jsonl").exists()
    assert main(["train", "--data", str(root / "data"), "--task", "19", "--out", str(runs_d / "set-0" / "qa19"),
                 "--quiet", "--config", str(items)]) == 0
    done = mix_readers(*four, "--above", "-1", "--out", str(tmp_path / "four"))
    alone = mix_readers(*three, "--above", "-1", "--out", str(tmp_path / "three"))
    assert done.returncode == alone.returncode == 0, done.stderr + alone.stderr
    [r] = [json.loads(line) for line in (tmp_path / "four" / "records.jsonl").read_text().splitlines()]
    [c] = [json.loads(line) for line in (tmp_path / "three" / "records.jsonl").read_text().splitlines()]
    assert r["readers"]["d"]["run"] == str(runs_d / "set-0" / "qa19") and set(r["readers"]) == {"a", "b", "c", "d"}
    assert set(r["cascade"]) == {"above", "crossfit_valid_error_ab", "test_error_ab", "test_error_c",
                                 "crossfit_valid_error_abc", "test_error_abc", "test_error_d"}
    assert r["cascade"]["test_error_abc"] == c["test_error"] and r["cascade"]["test_error_c"] == c["cascade"]["test_error_c"]
    assert r["cascade"]["crossfit_valid_error_abc"] == c["crossfit_valid_error"] and r["preset_hash"] != c["preset_hash"]
    a, b = mixture.load_pair(root / "mn" / "set-0" / "qa19", root / "words" / "set-0" / "qa19")
    reader_c, reader_d = (mixture.load_reader(p / "set-0" / "qa19") for p in (root / "pairs", runs_d))
    cfg = a.cfg
    splits = read_splits(cfg.data.dir, [19], cfg.data.valid_fraction)
    valid, test = (encode_tasks(splits[s], a.vocab, cfg.data.memory_size) for s in ("valid", "test"))
    ab, _, _ = mixture.fit(a, b, valid, [19])
    abc, _, _ = mixture.fit(mixture.as_reader(ab, a, b), reader_c, valid, [19])
    abcd, _, rows = mixture.fit(mixture.as_reader(abc, mixture.as_reader(ab, a, b), reader_c), reader_d, valid, [19])
    wrong = (predict(abcd, test).logits.argmax(-1) != test.answer).float().mean()
    assert math.isclose(r["test_error"], float(wrong), abs_tol=1e-6)
    assert r["crossfit_valid_error"] == round(rows[0]["crossfit_valid_error"], 6)
    below = mix_readers(*four, "--above", "1", "--out", str(tmp_path / "below"))  # no task above 100%
    assert below.returncode == 0, below.stderr
    [low] = [json.loads(line) for line in (tmp_path / "below" / "records.jsonl").read_text().splitlines()]
    assert set(low["readers"]) == {"a", "b"} and low["test_error"] == r["cascade"]["test_error_ab"]


def test_a_joint_cascade_mixes_the_one_model_with_reader_cs_joint_run_on_every_task(two_runs, tmp_path):
    """--then with runs trained on the tasks together: no threshold, every task of the seed set
    waits for C's joint run, then each task's record is the one model (A + B) + C scored there."""
    pairs = tmp_path / "pairs.yaml"
    pairs.write_text("data:\n  memory_size: 5\nmodel:\n  type: pairs\n  dim: 8\n  hidden: 8\n"
                     "train:\n  epochs: 1\n  linear_start_epochs: 0\n")
    runs = {name: tmp_path / f"{name}-joint" for name in ("mn", "words", "pairs")}
    for name in ("mn", "words"):
        shutil.copytree(two_runs / name, runs[name] / "set-0")
    cascade = [str(runs["mn"]), str(runs["words"]), "--then", str(runs["pairs"]), "--then-config", str(pairs),
               "--out", str(tmp_path / "bench")]
    waits = mix_readers(*cascade)
    assert waits.returncode == 0, waits.stderr
    assert "set 0: waits for reader C's run" in waits.stdout and "--joint --tasks 1,19 --sets 1 --first-set 0" in waits.stdout
    assert not (tmp_path / "bench" / "records.jsonl").exists()
    assert main(["train", "--data", str(two_runs / "data"), "--task", "1,19", "--out", str(runs["pairs"] / "set-0"),
                 "--quiet", "--config", str(pairs)]) == 0
    done = mix_readers(*cascade)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (tmp_path / "bench" / "records.jsonl").read_text().splitlines()]
    assert [(r["task"], r["joint"], r["readers"]["c"]["run"]) for r in records] == \
        [(t, [1, 19], str(runs["pairs"] / "set-0")) for t in (1, 19)]
    a, b = mixture.load_pair(runs["mn"] / "set-0", runs["words"] / "set-0")
    c = mixture.load_reader(runs["pairs"] / "set-0")
    splits = read_splits(two_runs / "data", [1, 19], a.cfg.data.valid_fraction)
    valid, test = (encode_tasks(splits[s], a.vocab, a.cfg.data.memory_size) for s in ("valid", "test"))
    ab, _, _ = mixture.fit(a, b, valid, [1, 19])
    abc, _, _ = mixture.fit(mixture.as_reader(ab, a, b), c, valid, [1, 19])
    wrong = predict(abc, test).logits.argmax(-1) != test.answer
    c_wrong = predict(c.model, encode_tasks(splits["test"], c.vocab, 5)).logits.argmax(-1) != test.answer
    for r, task in zip(records, (1, 19)):
        rows = test.task == task
        assert set(r["cascade"]) == {"crossfit_valid_error_ab", "test_error_ab", "test_error_c"}  # no threshold
        assert math.isclose(r["test_error"], float(wrong[rows].float().mean()), abs_tol=1e-6)
        assert math.isclose(r["cascade"]["test_error_c"], float(c_wrong[rows].float().mean()), abs_tol=1e-6)


def test_five_wrong_of_a_hundred_is_not_above_five_percent():
    from experiments.readers.mix_readers import is_above
    five = float((torch.arange(100) < 5).float().mean())  # float32: a hair above 0.05
    assert five > 0.05 and not is_above(five, 0.05) and is_above(float((torch.arange(100) < 6).float().mean()), 0.05)


def test_a_cascade_refuses_runs_of_another_preset_and_half_its_flags(three_per_task, tmp_path):
    root, pairs = three_per_task
    other = tmp_path / "other.yaml"
    other.write_text(pairs.read_text().replace("hidden: 8", "hidden: 9"))
    wrong = mix_readers(str(root / "mn"), str(root / "words"), "--then", str(root / "pairs"), "--then-config",
                        str(other), "--above", "-1", "--out", str(tmp_path / "out"))
    assert wrong.returncode == 2 and "trained with another preset than --then-config other" in wrong.stderr
    half = mix_readers(str(root / "mn"), str(root / "words"), "--then", str(root / "pairs"), "--out", str(tmp_path / "o"))
    assert half.returncode == 2 and "give both" in half.stderr and "Traceback" not in half.stderr
    sets = mix_readers(str(root / "mn"), str(root / "words"), "--sets", "2", "--out", str(tmp_path / "out"))
    assert sets.returncode == 2 and "give --first-set too" in sets.stderr and "Traceback" not in sets.stderr
    assert not (tmp_path / "out" / "records.jsonl").exists()


def test_reader_b_keeping_more_memories_than_a_is_refused(three_per_task, capsys, tmp_path):
    root, _ = three_per_task
    assert mix_main([str(root / "pairs" / "set-0" / "qa19"), str(root / "words" / "set-0" / "qa19"),
                     "--out", str(tmp_path / "mix")]) == 2
    assert "reader B reads the most recent of A's" in capsys.readouterr().err and not (tmp_path / "mix").exists()


def test_a_mixture_of_a_mixture_and_a_reader_with_fewer_memories_loads_as_fitted(three_per_task, tmp_path, capsys):
    root, _ = three_per_task
    run = {name: str(root / name / "set-0" / "qa19") for name in ("mn", "words", "pairs")}
    assert mix_main([run["mn"], run["words"], "--out", str(tmp_path / "ab")]) == 0
    assert mix_main([str(tmp_path / "ab"), run["pairs"], "--out", str(tmp_path / "abc")]) == 0
    capsys.readouterr()
    model, cfg, vocab, _ = checkpoint.load(tmp_path / "abc" / "model.pt")
    assert isinstance(model.a, Mixture) and model.memory_b == 5 and cfg.model.type == "mixture"
    assert main(["eval", "--checkpoint", str(tmp_path / "abc"), "--json"]) == 0
    assert 0 <= json.loads(capsys.readouterr().out)["error"] <= 1
