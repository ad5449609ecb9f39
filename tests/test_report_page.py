"""Pages that explain themselves (issue 71 item 6): the report defines each metric where it first
appears and names the model in words; a hop that found every memory masked is drawn as masked,
not as a chosen [0.00] cell, in every renderer and in the metrics."""
import csv
import io
import json
import re
from html import unescape

import pytest
import torch

from memnet import checkpoint, inspect, report
from memnet.cli import main

# two facts and three hops under hard masking: hops 1 and 2 choose the two, hop 3 finds both masked
TWO_FACTS = "1 Brian is a frog.\n2 Greg is a frog.\n3 What color is Greg?\tyellow\t2 1\n"


@pytest.fixture(scope="module")
def every_hop(inspect_run, tmp_path_factory):
    """inspect_run's model (3 hops, hard masking) made to take every hop: no halting probability
    passes a threshold of 1."""
    folder = tmp_path_factory.mktemp("every_hop")
    payload = checkpoint.read(inspect_run["checkpoint"])
    payload["config"]["model"]["halt_threshold"] = 1.0
    checkpoint.write(folder / "model.pt", {k: v for k, v in payload.items() if k != "format"})
    (folder / "story.txt").write_text(TWO_FACTS)
    data = folder / "data"
    data.mkdir()
    (data / "qa16_basic-induction_test.txt").write_text(TWO_FACTS)
    return {"checkpoint": folder / "model.pt", "story": folder / "story.txt", "data": data}


def inspect_out(capsys, every_hop, *argv) -> str:
    code = main(["inspect", "--checkpoint", str(every_hop["checkpoint"]), "--story", str(every_hop["story"]),
                 "--min-probability", "0", *map(str, argv)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_a_fully_masked_hop_chooses_nothing(capsys, every_hop):
    table = json.loads(inspect_out(capsys, every_hop, "--format", "json"))
    assert table["hops_used"] == 3 and table["attention"][2] == [0.0, 0.0]
    assert table["chosen"][2] is None and sorted(table["chosen"][:2]) == [1, 2] and table["masked"][2] == [1, 2]


def test_text_and_markdown_draw_a_fully_masked_hop_as_masked(capsys, every_hop):
    lines = inspect_out(capsys, every_hop, "--color", "never").splitlines()
    rows = [line for line in lines if line.startswith((" 1 ", " 2 "))]
    assert [row.split()[-1] for row in rows] == ["~0.00", "~0.00"]  # hop 3: masked, no [x] cell
    assert sum(row.count("[") for row in rows) == 2  # hops 1 and 2 each chose one
    assert lines[-1].endswith("; hop 3 chose no memory: every one was masked by an earlier hop, its weight went to "
                              "the null memory")
    markdown = inspect_out(capsys, every_hop, "--format", "markdown")
    cells = [line.split(" | ")[-1] for line in markdown.splitlines() if line.startswith(("| 1 ", "| 2 "))]
    assert cells == ["~~0.00~~ |", "~~0.00~~ |"]
    assert "hop 3 chose no memory: every one was masked by an earlier hop" in markdown


def test_csv_and_png_leave_a_fully_masked_hop_unchosen(capsys, every_hop, tmp_path):
    inspect_out(capsys, every_hop, "--format", "csv", "--out", tmp_path / "t.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text())))
    assert sorted(row["chosen_by_hops"] for row in rows) == ["1", "2"]
    import memnet
    answer = memnet.load(every_hop["checkpoint"]).answer(TWO_FACTS.rsplit("\n", 2)[0], "What color is Greg?",
                                                        min_probability=0)
    figure = inspect.heatmap_figure(answer.inspection)
    boxes = [p.get_x() for p in figure.axes[0].patches]
    assert sorted(boxes) == [-0.5, 0.5]  # hops 1 and 2 boxed, hop 3 not
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[2].endswith("(all masked)") and "masked" not in labels[0] + labels[1]


def test_the_metrics_count_no_hit_for_a_hop_that_chose_nothing():
    from memnet.data import Batch
    from memnet.evaluation import metrics
    from memnet.models import Result

    # one question, 2 hops, 2 slots: hop 1 chose slot 1, hop 2 found both masked (all zeros); the
    # 2nd supporting fact is slot 0, which argmax of zeros would name
    attention = torch.tensor([[[0.0, 1.0], [0.0, 0.0]]])
    result = Result(logits=torch.tensor([[1.0, 0.0]]), attention=attention, hops_used=torch.tensor([2]),
                    halted=torch.tensor([False]), hop_logits=torch.zeros(1, 2, 2), halt_probs=torch.zeros(1, 2), loss=None)
    batch = Batch(story=torch.zeros(1, 2, 1, dtype=torch.long), query=torch.zeros(1, 1, dtype=torch.long),
                  length=torch.tensor([2]), answer=torch.tensor([0]), support=torch.tensor([[1, 0]]),
                  n_support=torch.tensor([2]), task=torch.tensor([16]), time=torch.zeros(1, 2, dtype=torch.long))
    m = metrics(result, batch)
    assert m["hop_accuracy"] == [1.0, 0.0] and m["chain_accuracy"] == 0.0 and m["support_recall"] == 0.5


@pytest.fixture(scope="module")
def page(every_hop, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["report", "--checkpoint", str(every_hop["checkpoint"]), "--data", str(every_hop["data"]),
                 "--out", str(out)]) == 0
    return out.read_text()


def test_the_report_draws_a_fully_masked_hop_as_masked(page):
    section = page[page.index('<section class="question'):]
    assert '<th title="hop 3 chose no memory: every one was masked by an earlier hop, its weight went to the null ' \
           'memory">hop 3 (all masked)</th>' in section
    rows = re.findall(r"<tr><td class=\"num\">\d</td>.*?</tr>", section)
    assert [re.findall(r'class="w ([a-z]*)"', row)[2] for row in rows] == ["masked", "masked"]
    assert sum(row.count('class="w chosen"') for row in rows) == 2
    assert "(nothing: the null memory)" in section  # where hop 3's weight went


def test_the_report_defines_each_metric_where_it_first_appears(page):
    text = unescape(re.sub(r"<[^>]+>", " ", page))
    rows = re.findall(r'<tr><th>([^<]+)</th><td class="num">[^<]+</td><td class="def">([^<]+)</td></tr>', page)
    names = [name for name, _ in rows]
    assert names == ["questions", "accuracy", "chain accuracy", "support recall", "mean hops used",
                     "hop 1 accuracy", "hop 2 accuracy", "hop 3 accuracy"]
    for name, meaning in rows:
        first = text.index(name)  # the metric's first mention is its own row, its definition beside it
        value = text[first:first + len(name) + 20].split()[len(name.split())]
        assert value == "n/a" or value.rstrip("%").replace(".", "").isdigit(), (name, value)
        assert len(meaning.split()) >= 4
    meaning = dict(rows)
    assert "supporting fact" in meaning["chain accuracy"] and "reasoning order" in meaning["chain accuracy"]
    assert meaning["support recall"].startswith("share of all supporting facts that some hop taken chose")
    assert "2nd supporting fact" in meaning["hop 2 accuracy"] and "hop 2" in meaning["hop 2 accuracy"]
    assert "chooses the memory it attends to most" in text.replace("  ", " ")


def test_the_report_names_the_model_in_words(page):
    assert ("The model: MemN2N, d = 20, 3 hops, stopping rule on, hard masking, position encoding, temporal encoding, "
            "adjacent tying, softmax attention, a null memory</p>") in page
    assert "d=20" not in page and ", pe," not in page


def test_describe_reads_as_the_issue_asks():
    from memnet import config

    assert report.describe(config.load(None, {"model.type": "memn2n", "model.stopping": True, "model.masking": "soft",
                                              "model.dim": 50}))[1].startswith(
        "MemN2N, d = 50, 3 hops, stopping rule on, soft masking")
