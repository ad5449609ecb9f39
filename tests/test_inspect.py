"""inspect, report and ask, run through the real CLI on a tiny trained model (conftest: inspect_run).

The tiny model is far from solving qa16, so these tests check the tables against the model's
own Result and the data, not the answers.
"""
import csv
import io
import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

from memnet import babi, checkpoint, solver
from memnet.cli import build_parser, main
from memnet.data import encode_samples

SEED_STORY = "1 Brian is a frog.\n2 Lily is purple.\n3 Brian is yellow.\n4 Julius is green.\n5 Greg is a frog.\n6 What color is Greg?\n"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def inspect_json(capsys, run_, *extra):
    code, out, err = run(capsys, "inspect", "--checkpoint", run_["checkpoint"], "--data", run_["data"], "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_json_matches_the_models_result_and_the_story(capsys, inspect_run):
    sample = list(babi.samples(babi.load_split(inspect_run["data"], 16, "test")))[4]
    table = inspect_json(capsys, inspect_run, "--index", 4)
    assert [(m["id"], m["text"]) for m in table["memories"]] == [(f.id, f.text) for f in sample.facts]
    assert table["question"] == sample.question.text and table["answer"] == sample.question.answer
    assert table["support"] == list(sample.question.support)
    assert [m["gold"] for m in table["memories"] if m["gold"]] == [sample.question.support.index(m["id"]) + 1
                                                                  for m in table["memories"] if m["id"] in sample.question.support]

    model, cfg, vocab, _ = checkpoint.load(inspect_run["checkpoint"])
    with torch.no_grad():
        result = model(encode_samples([sample], vocab, cfg.data.memory_size))
    hops, n = int(result.hops_used[0]), len(sample.facts)
    assert table["hops_used"] == hops and len(table["attention"]) == hops
    for k in range(hops):  # slot i of the batch is fact n - 1 - i
        assert table["attention"][k] == pytest.approx(result.attention[0, k, :n].flip(0).tolist(), abs=1e-5)
        assert sum(table["attention"][k]) + table["nothing"][k] == pytest.approx(1.0, abs=1e-4)  # the null memory takes the rest
    assert table["chosen"] == [sample.facts[n - 1 - int(result.attention[0, k, :n].argmax())].id for k in range(hops)]
    assert table["prediction"] == vocab.answers[int(result.logits[0].argmax())]
    assert table["probability"] == pytest.approx(float(result.logits[0].softmax(-1).max()), abs=1e-5)
    assert table["stop_reason"] == ("halted" if bool(result.halted[0]) else "max hops")
    assert [h["answer"] for h in table["hop_answers"]] == [vocab.answers[int(i)] for i in result.hop_logits[0, :hops].argmax(-1)]


def test_hard_masking_is_shown(capsys, inspect_run):
    tables = inspect_json(capsys, inspect_run, "--all", "--limit", 20)
    multi = [t for t in tables if t["hops_used"] > 1]
    assert multi, "the tiny model should take more than one hop on some question"
    for t in multi:
        ids = [m["id"] for m in t["memories"]]
        for k in range(t["hops_used"]):
            assert t["masked"][k] == sorted(set(t["chosen"][:k]), key=ids.index)
            for line_id in t["masked"][k]:
                assert t["attention"][k][ids.index(line_id)] == 0.0  # hard masking: exactly no attention


def test_text_table(capsys, inspect_run):
    table = inspect_json(capsys, inspect_run, "--index", 2)
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"],
                         "--index", 2)
    assert code == 0 and "\033[" not in out  # no colour when not on a terminal
    lines = out.splitlines()
    assert lines[0] == f"test #2  Q: {table['question']}"
    assert lines[1].split()[3:] == [w for k in range(table["hops_used"]) for w in ("hop", str(k + 1))]
    rows = lines[2: 2 + len(table["memories"])]
    for row, memory in zip(rows, table["memories"]):
        assert row.split()[0] == str(memory["id"]) and memory["text"] in row
        assert row.count("[") == table["chosen"].count(memory["id"])
    gold = table["answer"]
    assert f"answer: {table['prediction']} (p={table['probability']:.2f})   gold: {gold}" in out
    assert f"hops used: {table['hops_used']} of {table['max_hops']} (stopped: {table['stop_reason']})" in out
    code, colored, _ = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"],
                           "--index", 2, "--color", "always")
    assert len(re.findall(r"\033\[1;32m *\[\d\.\d\d\]\033\[0m", colored)) == table["hops_used"]


def test_markdown_table(capsys, inspect_run):
    table = inspect_json(capsys, inspect_run, "--index", 1)
    code, out, _ = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"],
                       "--index", 1, "--format", "markdown")
    assert code == 0
    hops = table["hops_used"]
    header = "| sentence | " + " | ".join(f"hop {k + 1}" for k in range(hops)) + " |"
    lines = out.splitlines()
    start = lines.index(header)
    rows = [line.strip("|").split(" | ") for line in lines[start + 2: start + 2 + len(table["memories"])]]
    for k in range(hops):
        bold = [r for r, cells in enumerate(rows) if cells[k + 1].strip().startswith("**")]
        assert [table["memories"][r]["id"] for r in bold] == [table["chosen"][k]]
    for memory, cells in zip(table["memories"], rows):
        assert cells[0].strip().startswith(f"{memory['id']} {memory['text']}")
        assert ("(gold" in cells[0]) == (memory["gold"] is not None)


def test_csv_and_png(capsys, inspect_run, tmp_path):
    table = inspect_json(capsys, inspect_run, "--index", 0)
    code, out, _ = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"],
                       "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == len(table["memories"])
    assert [float(r["hop_1"]) for r in rows] == pytest.approx(table["attention"][0], abs=1e-4)
    assert [r["id"] for r in rows if "1" in r["chosen_by_hops"].split()] == [str(table["chosen"][0])]

    png = tmp_path / "attention.png"
    code, _, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"],
                       "--format", "png", "--out", png)
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image
    height, width, _ = matplotlib.image.imread(png).shape
    assert height > 100 and width > 200


def test_walk_wrong_only(capsys, inspect_run):
    everything = inspect_json(capsys, inspect_run, "--all")
    n_test = len(list(babi.samples(babi.load_split(inspect_run["data"], 16, "test"))))
    assert len(everything) == n_test
    wrong = inspect_json(capsys, inspect_run, "--all", "--wrong-only", "--limit", 3)
    expected = [t["label"] for t in everything if not t["correct"]][:3]
    assert expected, "the tiny model should get some question wrong"
    assert [t["label"] for t in wrong] == expected


def test_story_file_with_unknown_word(capsys, inspect_run, tmp_path):
    story = tmp_path / "story.txt"
    story.write_text(SEED_STORY)
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", story)
    assert code == 0
    assert "warning: the model never saw 'purple'; ignored" in err
    assert "Q: What color is Greg?" in out and "gold: (none given)" in out
    # one row per sentence, oldest first, with its own id and text (not only "1  " somewhere in the weights)
    rows = [re.match(r" *(\d+)  (.+?)  ", line).groups() for line in out.splitlines()[2:7]]
    assert rows == [(str(i), text) for i, text in enumerate(
        ["Brian is a frog.", "Lily is purple.", "Brian is yellow.", "Julius is green.", "Greg is a frog."], start=1)]
    assert out.splitlines()[7].split()[0] == "(nothing)"  # and no sixth row
    with_answer = tmp_path / "answered.txt"
    with_answer.write_text(SEED_STORY.replace("Greg?", "Greg?\tyellow\t5 1 3"))
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", with_answer, "--format", "json")
    table = json.loads(out)
    assert code == 0 and table["answer"] == "yellow" and table["support"] == [5, 1, 3]
    assert [m["gold"] for m in table["memories"]] == [2, None, 3, None, 1]


@pytest.mark.parametrize("args, message", [
    (["--checkpoint", "{tmp}/missing.pt"], "missing.pt: expected a checkpoint file (RUN/model.pt), found no such file"),
    (["--checkpoint", "{tmp}/corrupt.pt"], "not a readable memnet checkpoint"),
    (["--index", "100000"], "out of range"),
    (["--index", "-1"], "argument --index: expected a whole number >= 0, found -1"),
    (["--min-probability", "1.5", "--story", "{tmp}/gibberish.txt"],
     "argument --min-probability: expected a number from 0 to 1, found 1.5"),
    (["--min-probability", "nan"], "argument --min-probability: expected a number from 0 to 1, found nan"),
    (["--min-probability", "most"], "argument --min-probability: expected a number from 0 to 1, found 'most'"),
    (["--story", "{tmp}/no_question.txt"], "ending in '?'"),
    (["--story", "{tmp}/bad_ids.txt"], "ids increase by one"),
    (["--story", "{tmp}/gibberish.txt"], "no word the model knows"),
    (["--story", "{tmp}/only_question.txt"], "no sentences before the question"),
    (["--story", "{tmp}/missing.txt"], "missing.txt: expected a story file, found no such file"),
    (["--format", "png"], "needs --out"),
    (["--heads"], "a memory network has one attention per hop and no heads"),
])
def test_errors_are_one_line(capsys, inspect_run, tmp_path, args, message):
    (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "no_question.txt").write_text("1 Brian is a frog.\n2 Brian is yellow.\n")
    (tmp_path / "bad_ids.txt").write_text("1 Brian is a frog.\n3 What color is Brian?\n")
    (tmp_path / "gibberish.txt").write_text("1 Brian is a frog.\n2 Xyzzy plugh?\n")
    (tmp_path / "only_question.txt").write_text("1 What color is Brian?\n")
    argv = ["--checkpoint", inspect_run["checkpoint"], *(["--data", inspect_run["data"]] if "--story" not in args else [])]
    argv += [a.format(tmp=tmp_path) for a in args]
    code, out, err = run(capsys, "inspect", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("memnet inspect: error: ") and message in err


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.sections, self.inputs, self.scripts, self.urls, self.ids = [], [], [], 0, [], set()
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.ids.add(a.get("id"))
        if tag == "table":
            self.tables.append(a.get("class"))
        if tag == "section":
            self.sections.append(a.get("class"))
        if tag == "input":
            self.inputs.append(a)
        if tag == "script":
            self.scripts += 1
            assert "src" not in a
        self.urls += [v for k, v in attrs if k in ("href", "src") and v]

    def handle_data(self, data):
        self.text.append(data)


def test_report(capsys, inspect_run, tmp_path):
    everything = inspect_json(capsys, inspect_run, "--all")
    out = tmp_path / "report.html"
    code, _, err = run(capsys, "report", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"], "--out", out)
    assert code == 0, err
    html = out.read_text()
    page = _Page()
    page.feed(html)
    assert "http://" not in html and "https://" not in html and not page.urls
    assert page.tables.count("attention") == len(everything)
    # generated qa16 asks a few questions whose kind-mates differ in colour (the file answers from the one
    # introduced last): a prediction of another of their colours is flagged ambiguous, not wrong
    samples = list(babi.samples(babi.load_split(inspect_run["data"], 16, "test")))
    allowed = [solver.answers(16, q.facts, q.question.text) for q in samples]
    lenient = [not t["correct"] and len(a) > 1 and t["prediction"] in a for t, a in zip(everything, allowed)]
    assert sum(len(a) > 1 for a in allowed) > 0  # the check below sees some
    assert page.sections.count("question wrong") == sum(not t["correct"] for t in everything) - sum(lenient)
    assert page.sections.count("question ambiguous") == sum(lenient)
    assert {"metrics", "hops-used", "wrong-only"} <= page.ids
    assert any(i.get("type") == "checkbox" and i.get("id") == "wrong-only" for i in page.inputs) and page.scripts == 1
    # every metric in its own row, with the value `memnet eval` gives on the same questions
    code, evaluated, _ = run(capsys, "eval", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"],
                             "--json")
    m = json.loads(evaluated)
    shown = dict(re.findall(r'<tr><th>([^<]+)</th><td class="num">([^<]+)</td><td class="def">', html))
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    assert code == 0 and m["n"] == len(everything)
    assert shown == {"questions": str(len(everything)), "accuracy": pct(m["accuracy"]),
                     "chain accuracy": pct(m["chain_accuracy"]), "support recall": pct(m["support_recall"]),
                     "mean hops used": f"{m['mean_hops']:.2f}",
                     **{f"hop {k + 1} accuracy": pct(a) for k, a in enumerate(m["hop_accuracy"])}}
    assert m["accuracy"] == pytest.approx(sum(t["correct"] for t in everything) / len(everything))
    # the model's setting; every question's hops in the hops-used table, from 1 to the model's 3 hops
    assert '<p class="sub">' in html and ("<br>The model: MemN2N, d = 20, 3 hops, stopping rule on, hard masking, position encoding, "
                                          "temporal encoding, adjacent tying, softmax attention, a null memory</p>") in html
    used = Counter(t["hops_used"] for t in everything)
    assert re.findall(r'<tr><td class="num">(\d+)</td><td class="num">(\d+)</td>', html) == [
        (str(k), str(used[k])) for k in (1, 2, 3)]
    # each question labelled by its place, one section after another, a flag on each question with several
    # allowed answers, and nothing is left out: no note
    assert re.findall(r"<h3>([^<]*)</h3>", html) == [f"#{i}: {t['question']}" for i, t in enumerate(everything)]
    assert html.count("</section>\n<section ") == len(everything) - 1
    assert html.count("⚑ ambiguous: the story allows") == sum(len(a) > 1 for a in allowed)
    wrong = sum(not t["correct"] for t in everything) - sum(lenient)
    flagged = f"; ambiguous (⚑): {sum(len(a) > 1 for a in allowed)}, of which {sum(lenient)} answered with another answer"
    assert (f'id="wrong-only"> show only wrong answers ({wrong} of {len(everything)}{flagged} the story allows)'
            '</label></div>\n\n<p class="sub">Darker cells') in html
    code, _, _ = run(capsys, "report", "--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"],
                     "--out", out, "--limit", 5)
    page = _Page()
    page.feed(out.read_text())
    later_wrong = sum(not t["correct"] and not ok for t, ok in zip(everything[5:], lenient[5:]))
    assert later_wrong, "the tiny model should get some question after the fifth wrong"
    assert code == 0 and page.tables.count("attention") == 5 + later_wrong  # the first 5, then every wrong answer
    hidden = len(everything) - 5 - later_wrong
    assert (f"Showing the first 5 questions and every wrong answer after them; {hidden} right or ambiguous answers "
            "are not shown (run without --limit to see them).") in " ".join(page.text)


def report_page(capsys, inspect_run, tmp_path, stories):
    """`memnet report` of inspect_run's model on qa16 test stories: the parsed page and its text."""
    data = tmp_path / "data"
    babi.write_file(data / babi.task_filename(16, "test"), stories)
    out = tmp_path / "report.html"
    code, _, err = run(capsys, "report", "--checkpoint", inspect_run["checkpoint"], "--data", data, "--out", out)
    assert code == 0, err
    page = _Page()
    page.feed(out.read_text())
    return page, " ".join(page.text)


def test_report_flags_ambiguous_questions(capsys, inspect_run, tmp_path):
    frogs = [babi.Line(i + 1, text) for i, text in enumerate(
        ["Lily is a frog.", "Lily is green.", "Brian is a frog.", "Brian is yellow.", "Julius is a frog.",
         "Julius is white.", "Bernhard is a frog.", "Bernhard is gray.", "Greg is a frog."])]
    story = tmp_path / "story.txt"
    story.write_text("".join(f"{line.id} {line.text}\n" for line in frogs) + "10 What color is Greg?\n")
    code, out, _ = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--story", story, "--format", "json",
                       "--min-probability", 0)
    predicted = json.loads(out)["prediction"]
    gold = next(c for c in ("gray", "green", "white", "yellow") if c != predicted)  # the file's pick: another one
    plain = [babi.Line(1, "Brian is a frog."), babi.Line(2, "Brian is yellow."), babi.Line(3, "Greg is a frog.")]
    page, text = report_page(capsys, inspect_run, tmp_path, [
        babi.Story([*frogs, babi.Line(10, "What color is Greg?", gold, (9, 1, 2))]),
        babi.Story([*plain, babi.Line(4, "What color is Greg?", "yellow", (3, 1, 2))])])
    assert page.sections[0] == "question ambiguous"  # the prediction is one of the answers the story allows
    assert text.count("⚑ ambiguous: the story allows gray or green or white or yellow") == 1
    assert "of 2; ambiguous (⚑): 1, of which 1 answered with another answer the story allows)" in text


def test_report_counts_a_story_with_two_answers_as_ambiguous(capsys, inspect_run, tmp_path):
    frogs = [babi.Line(1, "Lily is a frog."), babi.Line(2, "Lily is green."), babi.Line(3, "Brian is a frog."),
             babi.Line(4, "Brian is yellow."), babi.Line(5, "Greg is a frog.")]
    plain = [babi.Line(1, "Brian is a frog."), babi.Line(2, "Brian is yellow."), babi.Line(3, "Greg is a frog.")]
    page, text = report_page(capsys, inspect_run, tmp_path, [
        babi.Story([*plain, babi.Line(4, "What color is Greg?", "yellow", (3, 1, 2))]),
        babi.Story([*frogs, babi.Line(6, "What color is Greg?", "green", (5, 1, 2))])])
    assert text.count("⚑ ambiguous: the story allows green or yellow") == 1
    assert text.count("⚑") == 2  # that flag and the filter's count: none for the story with one answer
    wrong, answered = page.sections.count("question wrong"), page.sections.count("question ambiguous")
    assert (f"show only wrong answers ({wrong} of 2; ambiguous (⚑): 1, of which {answered} answered with another "
            "answer the story allows)") in text


def test_ask_story_file(capsys, inspect_run, tmp_path):
    story = tmp_path / "story.txt"
    story.write_text(SEED_STORY)
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--story", story, "--format", "json")
    table = json.loads(out)
    assert code == 0 and table["question"] == "What color is Greg?" and len(table["memories"]) == 5


def test_every_flag_has_help():
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    for name in ("inspect", "report", "ask"):
        for action in subparsers.choices[name]._actions:
            assert action.help, f"{name} {action.option_strings} has no help"


def test_the_readme_pastes_the_help_as_it_prints(monkeypatch):
    # the README's command-line section is `memnet --help` verbatim: a new command shows there
    monkeypatch.setenv("COLUMNS", "80")
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    pasted = readme.split("    $ memnet --help\n", 1)[1].split("\n\n`memnet COMMAND --help`", 1)[0]
    help_text = build_parser().format_help().rstrip("\n")
    assert pasted == "\n".join(("    " + line).rstrip() for line in help_text.split("\n"))


@pytest.fixture(scope="module")
def transformer_run(inspect_run, tmp_path_factory):
    """A transformer reader (2 layers, no halting unit) trained one epoch on inspect_run's data:
    {data, checkpoint, cfg}."""
    from memnet import config
    from memnet.run import RunFolder
    from memnet.trainer import train

    cfg = config.load(None, {"data.dir": str(inspect_run["data"]), "data.task": "16", "model.type": "transformer",
                             "train.epochs": 1, "train.eval_every": 1, "train.linear_start_epochs": 0, "train.threads": 1})
    folder = tmp_path_factory.mktemp("tx")
    train(cfg, RunFolder(folder), progress=False)
    return {"checkpoint": folder / "model.pt", "data": inspect_run["data"], "cfg": cfg}


def test_transformer_reader_columns_are_layers(capsys, transformer_run):
    capsys.readouterr()  # the trainer's log lines
    run_, cfg = transformer_run, transformer_run["cfg"]
    table = inspect_json(capsys, run_, "--index", 0)
    assert table["step"] == "layer" and len(table["attention"]) == table["hops_used"] == cfg.model.layers
    assert all(sum(layer) == pytest.approx(1.0, abs=1e-4) for layer in table["attention"])
    code, out, _ = run(capsys, "inspect", "--checkpoint", run_["checkpoint"], "--data", run_["data"])
    assert code == 0 and out.splitlines()[1].split()[3:] == ["layer", "1", "layer", "2"]


def test_report_on_a_transformer(capsys, transformer_run, tmp_path):
    # a transformer has layers, not hops (it once failed here: its config has no `hops`)
    capsys.readouterr()
    out = tmp_path / "report.html"
    code, _, err = run(capsys, "report", "--checkpoint", transformer_run["checkpoint"], "--data", transformer_run["data"],
                       "--out", out)
    assert code == 0, err
    html = out.read_text()
    assert "<br>The model: Transformer, d = 20, 2 layers, 2 heads, stopping rule off, position encoding</p>" in html
    n = len(list(babi.samples(babi.load_split(transformer_run["data"], 16, "test"))))
    assert re.findall(r'<tr><td class="num">(\d+)</td><td class="num">(\d+)</td>', html) == [("1", "0"), ("2", str(n))]
    assert html.count("<th>layer 1</th><th>layer 2</th></tr>") == n


def test_halted_questions_show_only_the_hops_taken(capsys, inspect_run, tmp_path):
    payload = checkpoint.read(inspect_run["checkpoint"])
    payload["config"]["model"]["halt_threshold"] = 0.0  # every halting probability passes: stop after hop 1
    checkpoint.write(tmp_path / "eager.pt", {k: v for k, v in payload.items() if k != "format"})
    run_ = {"checkpoint": tmp_path / "eager.pt", "data": inspect_run["data"]}
    table = inspect_json(capsys, run_, "--index", 0)
    assert table["hops_used"] == 1 and table["stop_reason"] == "halted"
    assert len(table["attention"]) == len(table["chosen"]) == len(table["hop_answers"]) == 1
    code, out, _ = run(capsys, "inspect", "--checkpoint", run_["checkpoint"], "--data", run_["data"])
    assert out.splitlines()[1].split()[3:] == ["hop", "1"] and "hops used: 1 of 3 (stopped: halted)" in out


def test_the_command_line_offers_every_format_the_library_renders():
    # memnet.cli.inspection keeps its own list so that building the parser does not load torch
    from memnet import inspect
    from memnet.cli.inspection import FORMATS

    assert FORMATS == inspect.FORMATS


def test_png_has_a_colour_bar_and_a_legend_for_its_marks(inspect_run, tmp_path):
    from memnet import inspect

    model, cfg, vocab, _ = checkpoint.load(inspect_run["checkpoint"])
    table = inspect.inspect_samples(model, vocab, cfg, inspect.load_samples(inspect_run["data"], 16, "test")[:1])[0]
    heat, bar = inspect.heatmap(table, tmp_path / "a.png").axes
    assert bar.get_ylabel() == "attention weight" and bar.get_ylim() == (0.0, 1.0)
    legend = [t.get_text() for t in heat.get_legend().get_texts()]
    assert [entry.split(":")[0] for entry in legend] == ["chosen memory", "~0.00", "[gold k]", "→ answer"]


def test_eval_reads_the_models_data_from_anywhere_and_takes_a_run_folder(capsys, inspect_run, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "eval", "--checkpoint", inspect_run["checkpoint"].parent, "--json")
    n_test = len(list(babi.samples(babi.load_split(inspect_run["data"], 16, "test"))))
    assert code == 0, err
    assert json.loads(out)["n"] == n_test and list(json.loads(out)["tasks"]) == ["16"]


def test_eval_names_the_chain_family(capsys, inspect_run, tmp_path):
    from memnet import generator

    generator.write_dataset(tmp_path / "chain", "chain", train=20, test=20, seed=0)
    argv = ["eval", "--checkpoint", inspect_run["checkpoint"], "--data", tmp_path / "chain", "--task", "chain"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and list(json.loads(out)["tasks"]) == ["chain"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:3]] == ["chain", "all"]
    hops, answers = out.split("hops used by number of supporting facts\n")[1].split("\n\n")
    assert hops.splitlines()[-1].split()[0] == "chain"  # the hops table
    assert [line.split()[0] for line in answers.splitlines()[2:]] == ["chain", "all"]  # each hop's answer


def test_eval_sets_the_stopping_rules_gate(capsys, inspect_run, tmp_path):
    """--model.halt_confidence P: the rule stops at a hop only where its answer is at least P sure.
    A halting unit that stops at hop 1 on every question (h_k near 1), as the checkpoint has it, then
    gated at P = 1 (an answer that sure the tiny model never gives): every question reads to hop 3."""
    payload = checkpoint.read(inspect_run["checkpoint"])
    payload["state_dict"]["halting.b"] = torch.tensor([20.0])
    checkpoint.write(tmp_path / "stops.pt", {k: v for k, v in payload.items() if k != "format"})
    argv = ["eval", "--checkpoint", tmp_path / "stops.pt", "--data", inspect_run["data"], "--json"]
    by_gate = {}
    for gate in ([], ["--model.halt_confidence=0"], ["--model.halt_confidence", "1"]):
        code, out, err = run(capsys, *argv, *gate)
        assert code == 0, err
        by_gate[tuple(gate)] = json.loads(out)
    as_saved, off, gated = by_gate.values()
    assert as_saved == off and off["mean_hops"] == 1.0 and gated["mean_hops"] == 3.0
    assert off["accuracy"] == off["hop_answer_accuracy"][0] and gated["accuracy"] == gated["hop_answer_accuracy"][2]
    code, out, err = run(capsys, *argv, "--model.halt_confidence=1.5")
    assert code == 2 and out == "" and err == ("memnet eval: error: model.halt_confidence: expected between 0 and 1, "
                                               "found 1.5\n")


@pytest.mark.parametrize("command", [["eval"], ["inspect"], ["report", "--out", "r.html"]])
def test_an_old_relative_data_path_is_named(capsys, inspect_run, monkeypatch, tmp_path, command):
    payload = checkpoint.read(inspect_run["checkpoint"])
    payload["config"]["data"]["dir"] = "data"  # as runs stored --data before it was made absolute
    checkpoint.write(tmp_path / "old.pt", {k: v for k, v in payload.items() if k != "format"})
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, command[0], "--checkpoint", "old.pt", *command[1:])
    assert code == 2 and out == "" and err == (
        f"memnet {command[0]}: error: old.pt: the model's data folder 'data' (a path relative to wherever the model "
        "was trained) is not a folder here: give --data DIR\n")


def test_train_stores_the_data_folder_absolute(capsys, monkeypatch, tmp_path):
    from memnet import generator

    monkeypatch.chdir(tmp_path)
    generator.write_dataset("data", 16, train=30, test=10, seed=0)
    code, _, err = run(capsys, "train", "--data", "data", "--task", "16", "--out", "run", "--quiet", "--train.epochs", 1,
                       "--train.eval_every", 1, "--train.restarts", 1, "--train.linear_start_epochs", 0, "--train.threads", 1)
    assert code == 0, err
    assert checkpoint.read(tmp_path / "run" / "model.pt")["config"]["data"]["dir"] == str((tmp_path / "data").resolve())


def test_a_readers_gates_show_what_the_answering_hop_counted():
    """A reader whose Result has gates (the word reader's summed read, experiments/): the table's
    sum column is each memory's gate at the hop answered from, oldest first, in every format that
    has columns; a model without gates has none."""
    from memnet.config import load
    from memnet.data import Vocab
    from memnet.inspect import inspect_samples, render_markdown, render_text, to_dict
    from memnet.models import build_model, init_weights
    from test_model import STORY

    class Gated(torch.nn.Module):  # a memory network whose Result also carries gates
        def __init__(self, model):
            super().__init__()
            self.model, self.linear = model, False

        def forward(self, batch):
            r = self.model(batch)
            K, M = r.attention.shape[1:]
            gates = torch.sigmoid(torch.arange(K * M, dtype=torch.float32).view(K, M) / 10 - 1)  # (K, M) all different
            return r._replace(gates=gates.expand_as(r.attention).clone())

    samples = list(babi.samples(babi.parse_lines(STORY.splitlines())))
    vocab = Vocab.build(samples)
    cfg = load(None, {"model.answer_hidden": 4, "model.answer_from": "question"})
    model = Gated(init_weights(build_model(cfg, vocab), cfg, 0))
    with torch.no_grad():
        result = model(encode_samples(samples, vocab, cfg.data.memory_size))
    table = inspect_samples(model, vocab, cfg, samples)[2]
    n = len(samples[2].facts)
    hop = int(result.hops_used[2]) - 1
    assert table.summed == pytest.approx(result.gates[2, hop, :n].flip(0).tolist(), abs=1e-6)
    assert to_dict(table)["summed"] == table.summed
    text = render_text(table).splitlines()
    assert text[1].split()[-1] == "sum" and text[2].split()[-1] == f"{table.summed[0]:.2f}"
    markdown = render_markdown(table).splitlines()
    header = next(line for line in markdown if line.startswith("| sentence"))
    assert header.endswith("| sum |") and f"| {table.summed[-1]:.2f} |" in markdown[markdown.index(header) + 1 + n]
    assert inspect_samples(model.model, vocab, cfg, samples)[2].summed == []
