"""Honest answers: `ask` and `inspect --story` decline what the model cannot know (conftest:
inspect_run, a tiny qa16 model that has only ever been asked "What color is X?")."""
import io
import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

import torch

from memnet import ask, babi, checkpoint, forms, generator
from memnet.cli import main
from memnet.cli.inspection import MIN_PROBABILITY
from memnet.data import Vocab, encode_samples

ROOT = Path(__file__).resolve().parents[1]
STORY = "Brian is a frog.\nBrian is yellow.\nGreg is a frog.\n"


def expected_answer(model, cfg, vocab) -> tuple[str, float]:
    """The model's own answer and probability for STORY + "What color is Greg?", computed here."""
    facts = tuple(babi.Line(i + 1, text) for i, text in enumerate(STORY.splitlines()))
    sample = babi.Sample(facts, babi.Line(len(facts) + 1, "What color is Greg?", "?"))
    with torch.no_grad():
        probs = model(encode_samples([sample], vocab, cfg.data.memory_size)).logits[0].softmax(-1)
    return vocab.answers[int(probs.argmax())], float(probs.max())


def run(capsys, *argv, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_question_forms_replace_the_words_that_vary_alone():
    questions = ["What color is Greg?", "What color is Lily?", "Where is Mary?", "Where is John?",
                 "Who gave the apple to Bill?", "Who gave the milk to Bill?", "Who gave the milk to Fred?",
                 "Where was the milk before the office?"]  # 'milk' varies in another form, 'office' nowhere
    assert forms.question_forms(questions) == ["what color is X", "where is X", "where was the X before the office",
                                               "who gave the X to X"]
    # a form another one covers is dropped: "pink" never varies alone, yet X covers it
    assert forms.question_forms(["Is the pink rectangle above the box?", "Is the red square above the box?",
                                 "Is the red circle above the box?", "Is the blue circle above the box?",
                                 "Is the red square below the box?"]) == ["is the X X X the box"]
    assert forms.fits("What color is Zed?", "what color is X")  # a name never seen fills X
    assert not forms.fits("Where is Greg?", "what color is X") and not forms.fits("What color is it now?", "what color is X")


def test_the_checkpoint_carries_the_forms_and_old_ones_load_without(inspect_run):
    payload = checkpoint.read(inspect_run["checkpoint"])
    assert payload["vocab"]["question_forms"] == ["what color is X"]
    old = Vocab.from_dict({k: v for k, v in payload["vocab"].items() if k != "question_forms"})
    assert old.forms is None and "question_forms" not in old.to_dict()
    assert Vocab.from_dict(payload["vocab"]).to_dict() == payload["vocab"]


def test_ask_declines_what_it_cannot_know(capsys, inspect_run, monkeypatch):
    typed = (STORY + "Where is Greg?\nWhat color is Greg\nWhat color is Greg?\nreset\n"
             "Xyzzy plugh xyzzy.\nWhat color is Greg?\nFrog is a Brian.\nXyzzy plugh?\n")
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--min-probability", 0,
                         stdin=typed, monkeypatch=monkeypatch)
    assert code == 0
    assert out.startswith("The model knows questions of these forms (X: a name or thing):\n  what color is X?\n"
                          "It declines answers it gives with p under 0.00 (--min-probability).\n")
    assert ("cannot answer: the model was never asked a question like 'Where is Greg?' ('where' never occurred "
            "in training); it knows: what color is X?") in out
    assert "hint: 'What color is Greg' reads like a question; end it with '?' to ask it (not added to the story)" in out
    assert out.count("Q: What color is Greg?") == 1  # the hinted line did not join the story: 3 memories
    assert "3  Greg is a frog." in out and "4  What color is Greg" not in out
    assert "cannot answer: the story has no word the model knows" in out  # after reset: only 'Xyzzy plugh xyzzy.'
    assert "cannot answer: the question 'Xyzzy plugh?' has no word the model knows" in out
    assert err == "warning: the model never saw 'xyzzy', 'plugh'; ignored\n"  # the story line, each word once; declined questions say it themselves


@pytest.mark.parametrize("threshold", [0, 1])
def test_the_probability_threshold(capsys, inspect_run, monkeypatch, threshold):
    code, out, _ = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--min-probability", threshold,
                       stdin=STORY + "What color is Greg?\n", monkeypatch=monkeypatch)
    answer = next(line for line in out.splitlines() if line.startswith("answer: "))
    declined = [line for line in out.splitlines() if line.startswith("cannot answer: ")]
    p = float(answer.split("(p=")[1].split(")")[0])
    model, cfg, vocab, _ = checkpoint.load(inspect_run["checkpoint"])
    assert code == 0 and answer.startswith(f"answer: {expected_answer(model, cfg, vocab)[0]} (p=")
    assert p == pytest.approx(expected_answer(model, cfg, vocab)[1], abs=0.005)  # the model's own probability
    if threshold == 1:  # no answer is that sure: the table shows the best guess after the reason
        assert declined == [f"cannot answer: the model is not sure (its best answer has p={p:.2f}, "
                            f"under --min-probability 1.00); its best guess:"]
        assert out.index(declined[0]) < out.index(answer)
    else:
        assert declined == []


def test_inspect_story_declines_too(capsys, inspect_run, tmp_path):
    story = tmp_path / "where.txt"
    story.write_text("1 Brian is a frog.\n2 Where is Brian?\n")
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", story)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("memnet inspect: error: cannot answer: the model was never asked a question like 'Where is Brian?'")
    story.write_text("1 Brian is a frog.\n2 Brian is yellow.\n3 What color is Brian?\n")
    tables = {}
    for threshold in (0, 1):
        code, out, _ = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", story,
                           "--format", "json", "--min-probability", threshold)
        tables[threshold] = json.loads(out)
        assert code == 0
    assert tables[0]["cannot_answer"] is None
    assert tables[1]["cannot_answer"].startswith("the model is not sure")
    assert tables[1]["prediction"] == tables[0]["prediction"]  # the best guess is still there


def test_a_checkpoint_without_forms_checks_the_words(capsys, inspect_run, monkeypatch, tmp_path):
    payload = checkpoint.read(inspect_run["checkpoint"])
    del payload["vocab"]["question_forms"]  # as written before question forms
    checkpoint.write(tmp_path / "old.pt", {k: v for k, v in payload.items() if k != "format"})
    code, out, _ = run(capsys, "ask", "--checkpoint", tmp_path / "old.pt", "--min-probability", 0,
                       stdin=STORY + "Where is Greg?\nIs Greg a frog?\n", monkeypatch=monkeypatch)
    assert code == 0 and "(this checkpoint predates question forms: only the question's words are checked)" in out
    assert "cannot answer: the question has words the model never saw ('where' never occurred in training)" in out
    assert "Q: Is Greg a frog?" in out  # every word known: without forms it cannot tell this is a new question


def test_the_default_threshold_is_the_librarys():
    assert MIN_PROBABILITY == ask.MIN_PROBABILITY


def _read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"no {marker!r} within {timeout} s; the terminal shows {bytes(seen)[-500:]!r}")
        try:
            seen += os.read(fd, 4096)
        except OSError:  # the other side closed
            return


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal is POSIX")
def test_the_prompt_recalls_a_line_with_the_up_arrow(inspect_run, tmp_path):
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "INPUTRC": os.devnull}
    proc = subprocess.Popen([sys.executable, "-m", "memnet", "ask", "--checkpoint", str(inspect_run["checkpoint"]),
                             "--min-probability", "0", "--color", "never"],
                            stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen = bytearray()
    try:
        for typed in (b"Brian is a frog.\r", b"\x1b[A\r", b"What color is Brian?\r"):  # \x1b[A: the up arrow
            _read_until(master, b"> ", seen)
            del seen[:]
            os.write(master, typed)
        _read_until(master, b"> ", seen)
        os.write(master, b"\x04")  # Ctrl-D
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(master)
    screen = bytes(seen).decode(errors="replace")
    assert "Q: What color is Brian?" in screen
    rows = re.findall(r"^ *(\d+)  (.+?)  ", screen, re.M)
    assert rows == [("1", "Brian is a frog."), ("2", "Brian is a frog.")], screen  # line 2 is line 1, recalled


# ---------------------------------------------------------------------------- ask never invents

QA1_STORY = "Mary went to the kitchen.\nJohn went to the garden.\n"


def answers_and_reasons(out: str) -> list[str]:
    """What the session said to each question: 'Q: <question>' for an answer, else its 'cannot answer: ...' line."""
    return [line for line in out.splitlines() if line.startswith(("Q: ", "cannot answer: "))]


@pytest.mark.parametrize("model, story, asked, answered", [
    ("qa16", STORY, "What color is Lily?", "What color is Greg?"),
    ("qa1", QA1_STORY, "Where is Sandra?", "Where is Mary?"),
])
def test_a_name_the_story_never_mentions_is_declined(capsys, inspect_run, qa1_run, monkeypatch, model, story, asked,
                                                     answered):
    checkpoint_file = {"qa16": inspect_run, "qa1": qa1_run}[model]["checkpoint"]
    name = asked.split()[-1].rstrip("?")
    code, out, err = run(capsys, "ask", "--checkpoint", checkpoint_file, "--min-probability", 0,
                         stdin=story + asked + "\n" + answered + "\n", monkeypatch=monkeypatch)
    assert code == 0 and err == ""
    assert answers_and_reasons(out) == [f"cannot answer: the story never mentions {name}", f"Q: {answered}"]
    # the model knows the name from training: only the story decides
    assert name.lower() in checkpoint.load(checkpoint_file)[2].stoi


def test_the_x_a_story_must_mention_are_learned_from_the_training_data():
    def mentioned(task):
        return Vocab.build(babi.samples(generator.generate(task, 100, seed=1))).mentioned

    assert mentioned(1) == {"where is X": [2]}
    assert mentioned(16) == {"what color is X": [3]}
    # "Is John in the office?" may name a place the story never told of (the answer is no): only John must be there
    assert mentioned(6) == {"is X in the X": [1]}
    facts = (babi.Line(1, "John went home."),)
    vocab = Vocab.build([babi.Sample(facts, babi.Line(2, "Is John in the office?", "no", (1,))),
                         babi.Sample(facts, babi.Line(2, "Is John in the home?", "yes", (1,)))])
    assert vocab.forms == ["is john in the X"] and vocab.mentioned == {"is john in the X": []}


def test_the_checkpoint_carries_what_must_be_mentioned_and_older_ones_hold_every_x(capsys, inspect_run, monkeypatch,
                                                                                   tmp_path):
    payload = checkpoint.read(inspect_run["checkpoint"])
    assert payload["vocab"]["mentioned"] == {"what color is X": [3]}
    assert Vocab.from_dict(payload["vocab"]).to_dict() == payload["vocab"]
    del payload["vocab"]["mentioned"]  # as written before it
    old = Vocab.from_dict(payload["vocab"])
    assert old.mentioned is None and "mentioned" not in old.to_dict()
    checkpoint.write(tmp_path / "old.pt", {k: v for k, v in payload.items() if k != "format"})
    code, out, _ = run(capsys, "ask", "--checkpoint", tmp_path / "old.pt", "--min-probability", 0,
                       stdin=STORY + "What color is Lily?\nWhat color is Brian?\n", monkeypatch=monkeypatch)
    assert code == 0
    assert answers_and_reasons(out) == ["cannot answer: the story never mentions Lily", "Q: What color is Brian?"]


def test_a_word_never_seen_in_training_is_declined(capsys, inspect_run, monkeypatch):
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--min-probability", 0,
                         stdin=STORY + "What color is Zorro?\nZorro is a frog.\nWhat color is Zorro?\n",
                         monkeypatch=monkeypatch)
    assert code == 0
    assert answers_and_reasons(out) == [
        "cannot answer: the story never mentions Zorro (and the model never saw 'zorro')",
        "cannot answer: the model never saw 'zorro' in training: it cannot know what the question asks"]
    assert err == "warning: the model never saw 'zorro'; ignored\n"  # the story line


def test_spelling_variants_are_read_with_a_note(capsys, inspect_run, monkeypatch):
    typed = "Lily is a frog.\nLily is grey.\n" + STORY + "What colour is Greg?\nWhat color is Greg?\n"
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--min-probability", 0,
                         "--format", "json", stdin=typed, monkeypatch=monkeypatch)
    assert code == 0 and err == ""
    assert "note: reading 'grey' as 'gray'\n" in out and "note: reading 'colour' as 'color'\n" in out
    assert "cannot answer" not in out
    tables = [json.loads(part) for part in re.findall(r"^\{.*?^\}", out, re.M | re.S)]
    assert len(tables) == 2 and tables[0] == tables[1]  # 'colour' asks what 'color' asks
    assert "Lily is gray." in json.dumps(tables[0])
    model, cfg, vocab, _ = checkpoint.load(inspect_run["checkpoint"])
    assert "gray" in vocab.stoi and "grey" not in vocab.stoi and "colour" not in vocab.stoi


def test_a_spelling_the_model_knows_is_kept():
    vocab = Vocab(["<pad>", "<unk>", "colour", "color", "is"], [])
    notes = {}
    assert ask.respell("What colour is it? Grey.", vocab, notes) == "What colour is it? Grey."  # 'gray' unknown too
    assert notes == {}
    vocab = Vocab(["<pad>", "<unk>", "gray"], [])
    assert ask.respell("Grey, grey and GREY", vocab, notes) == "Gray, gray and Gray" and notes == {"grey": "gray"}


def test_inspect_story_declines_a_name_the_story_never_mentions(capsys, qa1_run, tmp_path):
    story = tmp_path / "sandra.txt"
    story.write_text("1 Mary went to the kitchen.\n2 Where is Sandra?\n")
    for command in ("inspect", "ask"):
        code, out, err = run(capsys, command, "--checkpoint", qa1_run["checkpoint"], "--story", story)
        assert (code, out, err) == (2, "", f"memnet {command}: error: cannot answer: the story never mentions Sandra\n")
    story.write_text("1 Mary went to the kitchen.\n2 Where is Mary?\tkitchen\t1\n")
    code, out, err = run(capsys, "inspect", "--checkpoint", qa1_run["checkpoint"], "--story", story)
    assert code == 0 and "Q: Where is Mary?" in out
