"""What `memnet inspect` prints, exactly: the text table (plain and in colour), the markdown
table, the JSON form and the CSV rows of hand-made Tables; the format dispatch; when colour is
used; how data text is shown; and the story and split readers (their results, and the file and
line their errors name). The expected strings are written out: they are what the user reads."""
import json

import pytest

from memnet import babi
from memnet.babi import Line, Sample
from memnet.data import Vocab
from memnet.errors import MemnetError
from memnet.inspect import (Table, _cell, _summary_lines, known_words_only, load_samples, read_story, render,
                            render_csv, render_markdown, render_text, shown, to_dict, use_color)

# the ANSI codes of each mark
CHOSEN, MASKED, GOLD, BAD, GOOD, RESET = "\033[1;32m", "\033[2m", "\033[36m", "\033[31m", "\033[32m", "\033[0m"


def table(**changes) -> Table:
    """Three memories, two hops taken of three; hop 2 masked the memory hop 1 chose; the null
    memory took some weight; the answer is wrong."""
    values = dict(question="Where is Mary?", answer="kitchen",
                  memories=[(1, "Mary went to the kitchen."), (2, "John left."), (4, "Mary moved.")],
                  attention=[[0.125, 0.75, 0.0625], [0.3, 0.0, 0.5]], chosen=[1, 2], masked=[[], [1]], support=[2, 0],
                  prediction="hallway", probability=0.4375, hops_used=2, max_hops=3, stop_reason="halted",
                  hop_answers=[("kitchen", 0.25), ("hallway", 0.4375)], label="test #7", nothing=[0.0625, 0.2])
    values.update(changes)
    return Table(**values)


def short(**changes) -> Table:
    """Sentences shorter than the 'sentence' header, one hop, no gold answer, no label, no mask,
    no null memory."""
    values = dict(question="Who?", answer=None, memories=[(1, "a b."), (2, "c d.")], attention=[[0.25, 0.75]],
                  chosen=[1], masked=[[]], support=[], prediction="b", probability=0.5, hops_used=1, max_hops=1,
                  stop_reason="max hops", hop_answers=[("b", 0.5)])
    values.update(changes)
    return Table(**values)


def layers(**changes) -> Table:
    """A transformer's table: layers, heads, a declined but correct answer, forgotten facts,
    an unknown word; both layers chose the same memory."""
    values = dict(question="Where is Mary?", answer="Hallway",
                  memories=[(11, "Mary went to the hallway."), (12, "John left.")],
                  attention=[[0.5, 0.25], [0.875, 0.125]], chosen=[0, 0], masked=[[], []], support=[0],
                  prediction="hallway", probability=0.9375, hops_used=2, max_hops=2, stop_reason="max hops",
                  hop_answers=[("garden", 0.5), ("hallway", 0.9375)], unknown=["zebra"], forgotten=3, label="story.txt",
                  step="layer", heads=[[[0.75, 0.25], [0.25, 0.75]], [[1.0, 0.0], [0.75, 0.25]]],
                  declined="the model was never asked a question like this")
    values.update(changes)
    return Table(**values)


LEGEND = "[x] chosen memory (argmax) of the hop"
REASONING = "; gold: place in the supporting facts' reasoning order"

# ---------------------------------------------------------------------------- text


def test_text_table_whole():
    assert render_text(table()) == (
        "test #7  Q: Where is Mary?\n"
        "id  sentence                   gold    hop 1    hop 2\n"
        " 1  Mary went to the kitchen.     2    0.12     0.30\n"
        " 2  John left.                        [0.75]   ~0.00\n"
        " 4  Mary moved.                   1    0.06    [0.50]\n"
        "    (nothing)                          0.06     0.20\n"
        "answer: hallway (p=0.44)   gold: kitchen  WRONG\n"
        "hops used: 2 of 3 (stopped: halted)\n"
        "had it stopped after: hop 1: kitchen (0.25)   hop 2: hallway (0.44)\n"
        f"{LEGEND}; ~x masked: chosen by an earlier hop{REASONING}; (nothing): the null memory, which reads nothing\n")


def test_text_table_in_colour():
    """Chosen cells bold green, masked dim, the gold column cyan, a wrong answer red; plain
    cells, the null memory's row and the other lines unpainted."""
    assert render_text(table(), color=True) == (
        "test #7  Q: Where is Mary?\n"
        "id  sentence                   gold    hop 1    hop 2\n"
        f" 1  Mary went to the kitchen.  {GOLD}   2{RESET}    0.12     0.30\n"
        f" 2  John left.                 {GOLD}    {RESET}  {CHOSEN} [0.75]{RESET}  {MASKED} ~0.00 {RESET}\n"
        f" 4  Mary moved.                {GOLD}   1{RESET}    0.06   {CHOSEN} [0.50]{RESET}\n"
        "    (nothing)                          0.06     0.20\n"
        f"{BAD}answer: hallway (p=0.44)   gold: kitchen  WRONG{RESET}\n"
        "hops used: 2 of 3 (stopped: halted)\n"
        "had it stopped after: hop 1: kitchen (0.25)   hop 2: hallway (0.44)\n"
        f"{LEGEND}; ~x masked: chosen by an earlier hop{REASONING}; (nothing): the null memory, which reads nothing\n")
    right = render_text(table(prediction="kitchen"), color=True).splitlines()
    assert right[6] == f"{GOOD}answer: kitchen (p=0.44)   gold: kitchen  correct{RESET}"


def test_text_table_of_short_sentences_without_gold_label_mask_or_null_memory():
    """The sentence column is never narrower than its header; no verdict without a gold answer;
    the legend names only the marks shown."""
    expected = ("Q: Who?\n"
                "id  sentence  gold    hop 1\n"
                " 1  a b.              0.25\n"
                " 2  c d.             [0.75]\n"
                "answer: b (p=0.50)   gold: (none given)\n"
                "hops used: 1 of 1 (stopped: max hops)\n"
                "had it stopped after: hop 1: b (0.50)\n"
                f"{LEGEND}{REASONING}\n")
    assert render_text(short()) == expected
    # in colour: no verdict, so the answer line is not painted
    assert render_text(short(), color=True) == expected.replace(
        " 1  a b.              0.25", f" 1  a b.      {GOLD}    {RESET}    0.25").replace(
        " 2  c d.             [0.75]", f" 2  c d.      {GOLD}    {RESET}  {CHOSEN} [0.75]{RESET}")
    one = render_text(short(memories=[(1, "a b.")], attention=[[1.0]], chosen=[0]))
    assert one.splitlines()[1:3] == ["id  sentence  gold    hop 1", " 1  a b.             [1.00]"]


def test_text_table_of_layers_heads_a_declined_answer_and_forgotten_facts():
    assert render_text(layers()) == (
        "story.txt  Q: Where is Mary?\n"
        "id  sentence                   gold  layer 1  layer 2\n"
        "11  Mary went to the hallway.     1   [0.50]   [0.88]\n"
        "12  John left.                         0.25     0.12\n"
        "cannot answer: the model was never asked a question like this; its best guess:\n"
        "answer: hallway (p=0.94)   gold: Hallway  correct\n"
        "layers used: 2 of 2 (stopped: max hops)\n"
        "had it stopped after: layer 1: garden (0.50)   layer 2: hallway (0.94)\n"
        "(3 older sentence(s) fell out of the 2-slot memory)\n"
        "per head (the columns above average them):\n"
        "id     L1 H1   L1 H2   L2 H1   L2 H2\n"
        "11      0.75    0.25    1.00    0.75\n"
        "12      0.25    0.75    0.00    0.25\n"
        "[x] chosen memory (argmax) of the layer; gold: place in the supporting facts' reasoning order\n")
    # in colour, the painted line is the one that names the answer, after the declining line
    lines = render_text(layers(), color=True).splitlines()
    assert lines[4] == "cannot answer: the model was never asked a question like this; its best guess:"
    assert lines[5] == f"{GOOD}answer: hallway (p=0.94)   gold: Hallway  correct{RESET}"
    assert lines[6] == "layers used: 2 of 2 (stopped: max hops)"
    wrong = render_text(layers(prediction="garden"), color=True).splitlines()
    assert wrong[5] == f"{BAD}answer: garden (p=0.94)   gold: Hallway  WRONG{RESET}"


def test_summary_lines():
    assert _summary_lines(table()) == ["answer: hallway (p=0.44)   gold: kitchen  WRONG",
                                       "hops used: 2 of 3 (stopped: halted)",
                                       "had it stopped after: hop 1: kitchen (0.25)   hop 2: hallway (0.44)"]
    assert _summary_lines(short()) == ["answer: b (p=0.50)   gold: (none given)", "hops used: 1 of 1 (stopped: max hops)",
                                       "had it stopped after: hop 1: b (0.50)"]
    assert _summary_lines(layers()) == [
        "cannot answer: the model was never asked a question like this; its best guess:",
        "answer: hallway (p=0.94)   gold: Hallway  correct",
        "layers used: 2 of 2 (stopped: max hops)",
        "had it stopped after: layer 1: garden (0.50)   layer 2: hallway (0.94)",
        "(3 older sentence(s) fell out of the 2-slot memory)"]


def test_cell_text_and_kind():
    t = table()
    assert [_cell(t, 0, row) for row in range(3)] == [(" 0.12 ", "plain"), ("[0.75]", "chosen"), (" 0.06 ", "plain")]
    assert [_cell(t, 1, row) for row in range(3)] == [(" 0.30 ", "plain"), ("~0.00 ", "masked"), ("[0.50]", "chosen")]


def test_text_shows_escapes_in_every_data_field():
    esc = "\x1b[2J"
    out = render_text(table(question=f"Where{esc}?", label=f"l{esc}", memories=[(1, f"a{esc}"), (2, "b"), (4, "c")],
                            prediction=f"p{esc}", answer=f"k{esc}", hop_answers=[(f"h{esc}", 0.25), ("x", 0.5)]))
    assert "\x1b" not in out
    assert out.count("\\x1b[2J") == 6

# ---------------------------------------------------------------------------- markdown


def test_markdown_whole():
    assert render_markdown(table()) == (
        "**Where is Mary?** gold: kitchen · predicted: **hallway** (0.44) ✗ · 2 of 3 hops (halted)\n"
        "\n"
        "| sentence | hop 1 | hop 2 |\n"
        "| --- | ---: | ---: |\n"
        "| 1 Mary went to the kitchen. *(gold 2)* | 0.12 | 0.30 |\n"
        "| 2 John left. | **0.75** | ~~0.00~~ |\n"
        "| 4 Mary moved. *(gold 1)* | 0.06 | **0.50** |\n"
        "| *(nothing: the null memory)* | 0.06 | 0.20 |\n"
        "\n"
        "had it stopped after: hop 1 → kitchen (0.25), hop 2 → hallway (0.44)\n")


def test_markdown_without_a_gold_answer():
    assert render_markdown(short()) == (
        "**Who?** gold: none given · predicted: **b** (0.50) · 1 of 1 hops (max hops)\n"
        "\n"
        "| sentence | hop 1 |\n"
        "| --- | ---: |\n"
        "| 1 a b. | 0.25 |\n"
        "| 2 c d. | **0.75** |\n"
        "\n"
        "had it stopped after: hop 1 → b (0.50)\n")


def test_markdown_of_layers_heads_and_a_declined_answer():
    assert render_markdown(layers()) == (
        "cannot answer: the model was never asked a question like this; its best guess:\n"
        "\n"
        "**Where is Mary?** gold: Hallway · predicted: **hallway** (0.94) ✓ · 2 of 2 layers (max hops)\n"
        "\n"
        "| sentence | layer 1 | layer 2 |\n"
        "| --- | ---: | ---: |\n"
        "| 11 Mary went to the hallway. *(gold 1)* | **0.50** | **0.88** |\n"
        "| 12 John left. | 0.25 | 0.12 |\n"
        "\n"
        "| sentence | L1 H1 | L1 H2 | L2 H1 | L2 H2 |\n"
        "| --- | ---: | ---: | ---: | ---: |\n"
        "| 11 Mary went to the hallway. | 0.75 | 0.25 | 1.00 | 0.75 |\n"
        "| 12 John left. | 0.25 | 0.75 | 0.00 | 0.25 |\n"
        "\n"
        "had it stopped after: layer 1 → garden (0.50), layer 2 → hallway (0.94)\n")


def test_markdown_escapes_the_heads_rows_and_the_hop_answers():
    out = render_markdown(layers(memories=[(11, "<b>x</b>"), (12, "a|b")], hop_answers=[("<i>", 0.5), ("y", 0.9375)]))
    assert "| 11 &lt;b&gt;x&lt;/b&gt; | 0.75 | 0.25 | 1.00 | 0.75 |" in out.splitlines()
    assert "| 12 a\\|b | 0.25 | 0.75 | 0.00 | 0.25 |" in out.splitlines()
    assert out.endswith("had it stopped after: layer 1 → &lt;i&gt; (0.50), layer 2 → y (0.94)\n")

# ---------------------------------------------------------------------------- json and csv


def test_to_dict_exactly():
    assert to_dict(table()) == {
        "label": "test #7", "question": "Where is Mary?", "answer": "kitchen", "prediction": "hallway",
        "probability": 0.4375, "correct": False, "cannot_answer": None, "step": "hop", "hops_used": 2, "max_hops": 3,
        "stop_reason": "halted",
        "memories": [{"id": 1, "text": "Mary went to the kitchen.", "gold": 2}, {"id": 2, "text": "John left.", "gold": None},
                     {"id": 4, "text": "Mary moved.", "gold": 1}],
        "attention": [[0.125, 0.75, 0.0625], [0.3, 0.0, 0.5]], "nothing": [0.0625, 0.2],
        "chosen": [2, 4], "masked": [[], [2]], "support": [4, 1],
        "hop_answers": [{"hop": 1, "answer": "kitchen", "probability": 0.25},
                        {"hop": 2, "answer": "hallway", "probability": 0.4375}],
        "unknown_words": [], "forgotten": 0}
    assert to_dict(layers()) == {
        "label": "story.txt", "question": "Where is Mary?", "answer": "Hallway", "prediction": "hallway",
        "probability": 0.9375, "correct": True, "cannot_answer": "the model was never asked a question like this",
        "step": "layer", "hops_used": 2, "max_hops": 2, "stop_reason": "max hops",
        "memories": [{"id": 11, "text": "Mary went to the hallway.", "gold": 1}, {"id": 12, "text": "John left.", "gold": None}],
        "attention": [[0.5, 0.25], [0.875, 0.125]], "nothing": [],
        "heads": [[[0.75, 0.25], [0.25, 0.75]], [[1.0, 0.0], [0.75, 0.25]]],
        "chosen": [11, 11], "masked": [[], []], "support": [11],
        "hop_answers": [{"hop": 1, "answer": "garden", "probability": 0.5},
                        {"hop": 2, "answer": "hallway", "probability": 0.9375}],
        "unknown_words": ["zebra"], "forgotten": 3}
    assert to_dict(short())["correct"] is None and to_dict(short())["answer"] is None


def test_csv_whole():
    """Exact text: newline-ended rows (not CRLF), two hops that chose one memory as '1 2', an
    unlabelled table named by its place, empty cells for hops not taken and no gold answer."""
    assert render_csv([layers(), short()]) == (
        "question,id,sentence,gold,hop_1,hop_2,chosen_by_hops,prediction,answer\n"
        "story.txt,11,Mary went to the hallway.,1,0.5000,0.8750,1 2,hallway,Hallway\n"
        "story.txt,12,John left.,,0.2500,0.1250,,hallway,Hallway\n"
        "1,1,a b.,,0.2500,,,b,\n"
        "1,2,c d.,,0.7500,,1,b,\n")

# ---------------------------------------------------------------------------- render


def test_render_dispatches_each_format():
    two = [table(), short()]
    assert render(two, "text") == render_text(table()) + "\n" + render_text(short())
    assert render(two, "text", color=True) == render_text(table(), True) + "\n" + render_text(short(), True)
    assert render(two, "markdown") == render_markdown(table()) + "\n" + render_markdown(short())
    assert render(two, "csv") == render_csv(two)
    assert json.loads(render(two, "json")) == [to_dict(table()), to_dict(short())]


def test_render_json_is_one_object_indented_by_two():
    out = render([short()], "json")
    assert json.loads(out) == to_dict(short())
    assert out.startswith('{\n  "label": "",\n  "question": "Who?",\n  "answer": null,\n')
    assert '\n  "attention": [\n    [\n      0.25,\n      0.75\n    ]\n  ],\n' in out
    assert out.endswith('\n  "unknown_words": [],\n  "forgotten": 0\n}\n')
    assert render([short(), short()], "json").startswith('[\n  {\n    "label": "",\n')


def test_render_names_the_formats_for_an_unknown_one():
    with pytest.raises(MemnetError) as e:
        render([table()], "html")
    assert str(e.value) == "format: expected one of text, markdown, json, csv, png, found 'html'"

# ---------------------------------------------------------------------------- colour and shown text


class Stream:
    def __init__(self, tty: bool):
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_use_color_on_a_terminal_only_and_never_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("no_color", raising=False)
    assert use_color(Stream(True)) is True
    assert use_color(Stream(False)) is False
    assert use_color(object()) is False  # no isatty at all (a stream-like object)
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Stream(True))
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: an empty NO_COLOR is not set
    assert use_color(Stream(True)) is True


def test_shown_converts_every_data_field():
    def mark(text: str) -> str:
        return f"<{text}>"

    t = shown(layers(), mark)
    assert (t.question, t.answer, t.prediction, t.label) == ("<Where is Mary?>", "<Hallway>", "<hallway>", "<story.txt>")
    assert t.memories == [(11, "<Mary went to the hallway.>"), (12, "<John left.>")]
    assert t.hop_answers == [("<garden>", 0.5), ("<hallway>", 0.9375)]
    assert t.unknown == ["<zebra>"]
    assert (t.attention, t.heads, t.declined, t.chosen) == (layers().attention, layers().heads, layers().declined, [0, 0])
    assert shown(short(), mark).answer is None  # no gold answer stays none
    assert shown(table(question="a\x1bb")).question == "a\\x1bb"  # the default: escapes made visible

# ---------------------------------------------------------------------------- reading stories and splits


VOCAB = Vocab(["<pad>", "<unk>", "is", "kitchen", "mary", "the", "to", "went", "where"], ["kitchen"])


def test_known_words_only_keeps_ids_answers_and_support():
    sample = Sample((Line(1, "Mary went to the Zebra kitchen."), Line(2, "Zebra moved.")),
                    Line(3, "Where is Mary now?", "kitchen", (1,)))
    cleaned, unknown = known_words_only(sample, VOCAB)
    assert cleaned == Sample((Line(1, "mary went to the kitchen"), Line(2, "")), Line(3, "where is mary", "kitchen", (1,)))
    assert unknown == ["moved", "now", "zebra"]


def test_known_words_only_refuses_what_it_cannot_ask():
    with pytest.raises(MemnetError) as e:
        known_words_only(Sample((), Line(1, "Where is Mary?", "kitchen", ())), VOCAB)
    assert str(e.value) == "the story has no sentences before the question"
    with pytest.raises(MemnetError) as e:
        known_words_only(Sample((Line(1, "Mary went home."),), Line(2, "Who knows?", "x", ())), VOCAB)
    assert str(e.value) == "the question 'Who knows?' has no word the model knows"


def test_read_story_with_and_without_an_answer(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text("1 Mary went to the kitchen.\n2 John left.\n3 Where is Mary?\tkitchen\t1\n")
    assert read_story(path) == Sample((Line(1, "Mary went to the kitchen."), Line(2, "John left.")),
                                      Line(3, "Where is Mary?", "kitchen", (1,)))
    # no answer, spaces after the question, blank lines: the question keeps its id, with no answer or support
    path.write_text("1 Mary went to the kitchen.\n\n2 Where is Mary?  \n\n")
    assert read_story(path) == Sample((Line(1, "Mary went to the kitchen."),), Line(2, "Where is Mary?", "", ()))


def test_read_story_errors_name_the_file_and_its_own_line(tmp_path):
    path = tmp_path / "story.txt"

    def error(text: str) -> str:
        path.write_text(text)
        with pytest.raises(MemnetError) as e:
            read_story(path)
        return str(e.value)

    assert error("\n  \n") == f"{path}: empty story file"
    # blank lines count: the line named is the file's own
    assert error("1 Mary went home.\n\n2 Who is Mary\n") == \
        f"{path}:3: expected the story to end with a question ending in '?', found '2 Who is Mary'"
    assert error("1 Mary went home.\n\n\nJohn left.\n3 Where is Mary?\n") == \
        f"{path}:4: expected a line 'ID text' with an integer ID, found 'John left.'"
    assert error("1 Mary went home.\n\nJohn left.\n3 Where is Mary?\tkitchen\t1\n") == \
        f"{path}:3: expected a line 'ID text' with an integer ID, found 'John left.'"
    # a question line that breaks the format is shown as written (without the placeholder answer)
    assert error("1 Mary went home.\n 2 Where is Mary?\n") == \
        f"{path}:2: expected a line 'ID text' with an integer ID, found ' 2 Where is Mary?'"
    assert error("1 Mary went home.\n3 Where is Mary?\n") == \
        f"{path}:2: expected id 2 (ids increase by one within a story), found id 3"


def write_task(folder, split: str, stories: int) -> None:
    folder.mkdir(exist_ok=True)
    babi.write_file(folder / babi.task_filename(1, split), [
        babi.Story([Line(1, f"Mary went to room{n}."), Line(2, "Where is Mary?", f"room{n}", (1,))]) for n in range(stories)])


def test_load_samples_splits_as_the_trainer_does(tmp_path):
    """Without a valid file, valid is carved out of train (a tenth of 15 stories rounds to 2);
    with one, it is that file; test is the test file."""
    write_task(tmp_path / "a", "train", 15)
    write_task(tmp_path / "a", "test", 3)
    train, valid = load_samples(tmp_path / "a", 1, "train"), load_samples(tmp_path / "a", 1, "valid")
    answers = lambda samples: sorted(s.question.answer for s in samples)  # noqa: E731
    assert (len(train), len(valid)) == (13, 2)
    assert sorted(answers(train) + answers(valid)) == sorted(f"room{n}" for n in range(15))
    assert len(load_samples(tmp_path / "a", 1, "valid", valid_fraction=0.2)) == 3
    assert answers(load_samples(tmp_path / "a", 1, "test")) == ["room0", "room1", "room2"]
    write_task(tmp_path / "a", "valid", 4)
    assert answers(load_samples(tmp_path / "a", 1, "valid")) == ["room0", "room1", "room2", "room3"]
    assert len(load_samples(tmp_path / "a", 1, "train")) == 15
    with pytest.raises(MemnetError) as e:
        load_samples(tmp_path / "none", 1, "test")
    assert str(e.value) == f"{tmp_path / 'none'}: no such data folder"
