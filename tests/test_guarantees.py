"""The documented guarantees, each made to fail on purpose: checkpoints refuse pickled objects,
a write that fails half-way leaves the old file, the outputs escape a hostile story, and the
rendered tables and metrics put the right number in the right cell (hand-made inputs)."""
import csv
import io
import os
import zipfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from memnet import babi, checkpoint, config, files, report
from memnet.data import Batch
from memnet.errors import MemnetError
from memnet.evaluation import hop_answers_table, hops_table, metrics, task_table
from memnet.inspect import Table, render
from memnet.models import Result
from memnet.run import RunFolder

# ---------------------------------------------------------------------------- checkpoints

RAN = []


def side_effect():
    """What a malicious pickle would run on load."""
    RAN.append("pickled code ran")
    return {}


class Payload:
    def __reduce__(self):
        return side_effect, ()


def test_a_checkpoint_holding_a_pickled_object_is_refused(tmp_path):
    RAN.clear()
    path = tmp_path / "model.pt"
    torch.save({"format": checkpoint.FORMAT, "state_dict": {}, "config": {}, "vocab": Payload()}, path)
    with pytest.raises(MemnetError, match=r"model\.pt: not a readable memnet checkpoint \(expected tensors and plain "
                       r"values, found a file that holds other objects; it is not loaded, since loading it could run code\)"):
        checkpoint.read(path)
    with pytest.raises(MemnetError, match="not a readable memnet checkpoint"):
        checkpoint.load(path)
    assert RAN == []  # refused before anything was unpickled
    torch.load(path, weights_only=False)  # the file does hold code: a plain load runs it
    assert RAN == ["pickled code ran"]


def test_checkpoint_read_names_what_is_missing_or_foreign(tmp_path):
    path = tmp_path / "c.pt"
    checkpoint.write(path, {"state_dict": {}, "config": {}})
    with pytest.raises(MemnetError, match=r"c\.pt: memnet checkpoint without 'vocab'"):
        checkpoint.read(path)
    torch.save({"format": "other", "state_dict": {}}, path)
    with pytest.raises(MemnetError, match=r"not a memnet checkpoint \(expected a dict with format 'memnet-3' or 'memnet-2', found format 'other'\)"):
        checkpoint.read(path)
    torch.save([1, 2], path)
    with pytest.raises(MemnetError, match="not a memnet checkpoint"):
        checkpoint.read(path)
    checkpoint.write(path, {"state_dict": {}, "config": "no sections", "vocab": {}})
    with pytest.raises(MemnetError, match="the checkpoint's config is not a mapping of sections"):
        checkpoint.read(path)
    path.write_bytes(b"not a zip file at all")
    with pytest.raises(MemnetError) as error:
        checkpoint.read(path)
    assert str(error.value) == (f"{path}: not a readable memnet checkpoint (expected a file written by memnet train "
                                "(a zip archive), found one that begins b'not a zip file a')")
    path.write_bytes(b"")
    with pytest.raises(MemnetError) as error:
        checkpoint.read(path)
    assert str(error.value) == f"{path}: not a readable memnet checkpoint (expected a file written by memnet train, found an empty file)"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"junk")
    with pytest.raises(MemnetError, match=r"c\.pt: not a readable memnet checkpoint \(expected a file written by memnet "
                       r"train, found a zip archive torch cannot read: .*version"):
        checkpoint.read(path)
    with pytest.raises(MemnetError, match=r"nope\.pt: no such checkpoint file"):
        checkpoint.read(tmp_path / "nope.pt")


# ---------------------------------------------------------------------------- atomic writes


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_write_that_fails_half_way_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    checkpoint.write(path, {"state_dict": {"w": torch.ones(3)}, "config": {}, "vocab": {}})
    before = path.read_bytes()
    real_fdopen = os.fdopen

    class HalfWriter:
        """A file that takes half of what it is given, then fails (a full disk)."""

        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            self.f.flush()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fdopen", lambda fd, mode, **kw: HalfWriter(real_fdopen(fd, mode, **kw)))
    with pytest.raises(MemnetError, match=r"model.pt: cannot write \(No space left on device\)"):
        checkpoint.write(path, {"state_dict": {"w": torch.zeros(1000)}, "config": {}, "vocab": {}})
    assert path.read_bytes() == before and leftovers(tmp_path) == []
    monkeypatch.undo()

    def interrupted_replace(src, dst):
        raise KeyboardInterrupt  # Ctrl-C between writing and renaming

    monkeypatch.setattr(files.os, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        RunFolder(tmp_path, force=True).save_model({"state_dict": {}, "config": {}, "vocab": {}})
    assert path.read_bytes() == before and leftovers(tmp_path) == []
    monkeypatch.undo()
    assert torch.equal(checkpoint.read(path)["state_dict"]["w"], torch.ones(3))


def test_atomic_write_writes_text_and_bytes_and_makes_the_folder(tmp_path):
    files.atomic_write(tmp_path / "a" / "b.txt", "héllo\n")
    assert (tmp_path / "a" / "b.txt").read_bytes() == "héllo\n".encode("utf-8")
    files.atomic_write(tmp_path / "a" / "b.txt", b"\x00\x01")
    assert (tmp_path / "a" / "b.txt").read_bytes() == b"\x00\x01" and leftovers(tmp_path / "a") == []


def test_run_folder_files_and_refusals(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(MemnetError, match=r"file: expected a run folder, found a file"):
        RunFolder(tmp_path / "file")
    config_file = tmp_path / "run" / "config.yaml"
    config_file.parent.mkdir()
    config_file.write_text("train: {}\n")
    with pytest.raises(MemnetError, match=r"run/config\.yaml: the run would write its config over the config file"):
        RunFolder(tmp_path / "run", config_source=config_file)
    with pytest.raises(MemnetError, match=r"run: holds another run \(config\.yaml\); --resume continues it"):
        RunFolder(tmp_path / "run")
    deep = RunFolder(tmp_path / "new" / "deeper" / "run")
    assert deep.saved_model is None and deep.confirm_model() is None  # nothing written yet
    deep.start(config.Config())
    assert config.load(deep.path / "config.yaml") == config.Config()
    deep.log({"epoch": 1, "loss": float("inf")})
    deep.log({"final": True})
    assert (deep.path / "metrics.jsonl").read_text() == '{"epoch": 1, "loss": null}\n{"final": true}\n'
    # a replaced run's files go at start, the new run's stay
    checkpoint.write(deep.path / "last.pt", {"config": {}, "vocab": {}})
    replaced = RunFolder(deep.path, force=True)
    assert replaced.present == ["config.yaml", "metrics.jsonl", "last.pt"]
    (deep.path / "metrics.jsonl").unlink()  # gone before the new run starts (another process): no error
    replaced.start(config.Config())
    assert sorted(p.name for p in deep.path.iterdir()) == ["config.yaml"]
    # a resumed run keeps them; last.pt of another format is refused by name
    checkpoint.write(deep.path / "last.pt", {"config": {}, "vocab": {}})
    (deep.path / "metrics.jsonl").write_text("{}\n")
    resumed = RunFolder(deep.path, resume=True, force=True)
    resumed.start(config.Config())
    assert (deep.path / "metrics.jsonl").read_text() == "{}\n"
    with pytest.raises(MemnetError, match=r"last\.pt: written by an earlier memnet \(memnet-3\); it cannot be resumed"):
        resumed.read_last()


def test_metrics_jsonl_that_cannot_be_appended_is_named(tmp_path):
    run = RunFolder(tmp_path / "run")
    (tmp_path / "run" / "metrics.jsonl").mkdir(parents=True)  # a folder where the file should be
    with pytest.raises(MemnetError, match=r"metrics\.jsonl: cannot append \(Is a directory\)"):
        run.log({"epoch": 1})


# ---------------------------------------------------------------------------- rendered outputs

HOSTILE = "<script>alert('x')</script> went to the | kitchen"
FORMULA = "=HYPERLINK(\"http://evil\",\"click\")"


def table(**changes) -> Table:
    """Three memories, two hops taken of three; hop 2 masked the memory hop 1 chose."""
    values = dict(question="Where is <b>Mary</b>?", answer="kitchen", memories=[(1, HOSTILE), (2, FORMULA), (4, "Mary moved.")],
                  attention=[[0.125, 0.75, 0.0625], [0.3, 0.0, 0.5]], chosen=[1, 2], masked=[[], [1]], support=[2, 0],
                  prediction="hallway", probability=0.4375, hops_used=2, max_hops=3, stop_reason="halted",
                  hop_answers=[("kitchen", 0.25), ("hallway", 0.4375)], label="test #7", nothing=[0.0625, 0.2])
    values.update(changes)
    return Table(**values)


def test_text_table_cells():
    lines = render([table()], "text").splitlines()
    assert lines[0] == "test #7  Q: Where is <b>Mary</b>?"
    assert lines[1].split() == ["id", "sentence", "gold", "hop", "1", "hop", "2"]
    # id, sentence, gold place, then one cell per hop taken: [x] chosen, ~x masked
    assert lines[2] == f" 1  {HOSTILE}     2    0.12     0.30"
    assert lines[3] == f" 2  {FORMULA:<{len(HOSTILE)}}         [0.75]   ~0.00"
    assert lines[4] == f" 4  {'Mary moved.':<{len(HOSTILE)}}     1    0.06    [0.50]"
    assert lines[5].split() == ["(nothing)", "0.06", "0.20"]
    assert "answer: hallway (p=0.44)   gold: kitchen  WRONG" in lines
    assert "hops used: 2 of 3 (stopped: halted)" in lines
    assert "had it stopped after: hop 1: kitchen (0.25)   hop 2: hallway (0.44)" in lines


def test_markdown_table_cells():
    out = render([table()], "markdown").splitlines()
    start = out.index("| sentence | hop 1 | hop 2 |")
    assert out[start + 1] == "| --- | ---: | ---: |"
    assert out[start + 3] == f"| 2 {FORMULA} | **0.75** | ~~0.00~~ |"
    assert out[start + 4] == "| 4 Mary moved. *(gold 1)* | 0.06 | **0.50** |"
    assert out[start + 5] == "| *(nothing: the null memory)* | 0.06 | 0.20 |"
    assert out[start + 2].endswith(" *(gold 2)* | 0.12 | 0.30 |")
    assert "\\| kitchen" in out[start + 2]  # a pipe in a sentence does not split the row
    assert out[start + 2].count(" | ") == 2


def test_markdown_escapes_markup_in_the_story():
    out = render([table()], "markdown")
    assert "<script>" not in out and "<b>" not in out


def test_csv_every_column():
    text = render([table(), table(label="", prediction="kitchen", hops_used=1, attention=[[0.5, 0.25, 0.25]],
                                  chosen=[0], masked=[[]], answer=None)], "csv")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["question", "id", "sentence", "gold", "hop_1", "hop_2", "hop_3", "chosen_by_hops", "prediction",
                       "answer"]
    assert rows[1:4] == [
        ["test #7", "1", HOSTILE, "2", "0.1250", "0.3000", "", "", "hallway", "kitchen"],
        ["test #7", "2", "'" + FORMULA, "", "0.7500", "0.0000", "", "1", "hallway", "kitchen"],
        ["test #7", "4", "Mary moved.", "1", "0.0625", "0.5000", "", "2", "hallway", "kitchen"],
    ]
    # an unlabelled table is named by its place; hops not taken are empty; no gold answer: empty
    assert rows[4] == ["1", "1", HOSTILE, "2", "0.5000", "", "", "1", "kitchen", ""]
    assert len(rows) == 7


def test_csv_defuses_formula_cells():
    rows = list(csv.reader(io.StringIO(render([table()], "csv"))))
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)


def test_html_escapes_the_story_and_puts_each_weight_in_its_cell():
    html = report._table_html(table(), [])
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "Where is &lt;b&gt;Mary&lt;/b&gt;?" in html and "<b>Mary" not in html
    rows = html.split("<tr>")[2:]  # after the header row
    assert rows[0].startswith('<td class="num">1</td><td>&lt;script&gt;')
    assert '<td class="gold">2</td><td class="w " style="background:rgba(31,119,180,0.125);color:#222">0.12</td>' in rows[0]
    assert '<td class="w chosen" style="background:rgba(31,119,180,0.750);color:#fff">0.75</td>' in rows[1]
    assert '<td class="w masked" style="background:rgba(31,119,180,0.000);color:#222">0.00</td>' in rows[1]
    assert '<td class="w chosen" style="background:rgba(31,119,180,0.500);color:#222">0.50</td>' in rows[2]
    assert 'class="question wrong"' in html and "predicted <b>hallway</b> (0.44), gold <b>kitchen</b>" in html
    assert "2 of 3 hops (halted)" in html and "had it stopped after: hop 1 → kitchen (0.25), hop 2 → hallway (0.44)" in html
    right = report._table_html(table(prediction="kitchen"), ["kitchen", "hallway"])
    assert 'class="question right"' in right and "⚑ ambiguous: the story allows kitchen or hallway" in right
    assert 'class="question ambiguous"' in report._table_html(table(), ["kitchen", "hallway"])


def test_report_metrics_carry_their_values():
    m = {"n": 12, "accuracy": 0.75, "chain_accuracy": 0.5, "support_recall": None, "mean_hops": 1.5,
         "hop_accuracy": [1.0, 0.25, None]}
    html = report._metrics_html(m, Counter({1: 6, 2: 6}), 3)
    for name, value in [("questions", "12"), ("accuracy", "75.0%"), ("chain accuracy", "50.0%"),
                        ("support recall", "n/a"), ("mean hops used", "1.50"), ("hop 1 accuracy", "100.0%"),
                        ("hop 2 accuracy", "25.0%"), ("hop 3 accuracy", "n/a")]:
        assert f'<tr><th>{name}</th><td class="num">{value}</td><td class="def">' in html
    assert '<tr><td class="num">2</td><td class="num">6</td><td><span class="bar" style="width:100px"></span> 50.0%</td></tr>' in html
    assert '<tr><td class="num">3</td><td class="num">0</td><td><span class="bar" style="width:0px"></span> 0.0%</td></tr>' in html


def test_report_metrics_html_exactly():
    m = {"n": 4, "accuracy": 0.75, "chain_accuracy": 0.5, "support_recall": None, "mean_hops": 1.75,
         "hop_accuracy": [0.25, None]}
    define = lambda name: f'<td class="def">{report.DEFINITIONS[name]}</td></tr>'  # noqa: E731
    assert report._metrics_html(m, Counter({1: 1, 2: 3}), 2) == "\n".join([
        '<div class="side"><div><h2>Metrics</h2><table class="metrics" id="metrics">',
        "<tr><th>metric</th><th>value</th><th>what it measures</th></tr>",
        '<tr><th>questions</th><td class="num">4</td>' + define("questions"),
        '<tr><th>accuracy</th><td class="num">75.0%</td>' + define("accuracy"),
        '<tr><th>chain accuracy</th><td class="num">50.0%</td>' + define("chain accuracy"),
        '<tr><th>support recall</th><td class="num">n/a</td>' + define("support recall"),
        '<tr><th>mean hops used</th><td class="num">1.75</td>' + define("mean hops used"),
        '<tr><th>hop 1 accuracy</th><td class="num">25.0%</td><td class="def">of the questions with a 1st supporting '
        "fact, the share whose hop 1 (when taken) chose that fact, the 1st in the reasoning order</td></tr>",
        '<tr><th>hop 2 accuracy</th><td class="num">n/a</td><td class="def">of the questions with a 2nd supporting '
        "fact, the share whose hop 2 (when taken) chose that fact, the 2nd in the reasoning order</td></tr>",
        "</table>",
        '<p class="sub">A hop <i>chooses</i> the memory it attends to most (its argmax); "n/a": no question has that '
        "many supporting facts.</p></div>",
        '<div><h2>Hops used</h2><p class="sub">how many questions stopped after each number of hops</p>'
        '<table class="metrics" id="hops-used"><tr><th>hops</th><th>questions</th><th></th></tr>',
        # one row per hop from 1 to the model's hops; a bar 200px wide for every question
        '<tr><td class="num">1</td><td class="num">1</td><td><span class="bar" style="width:50px"></span> 25.0%</td></tr>',
        '<tr><td class="num">2</td><td class="num">3</td><td><span class="bar" style="width:150px"></span> 75.0%</td></tr>',
        "</table></div></div>"])


def test_html_table_exactly():
    t = table(question="Where is Mary?", answer="hallway", memories=[(1, "Mary went to the kitchen."), (3, "Mary moved.")],
              attention=[[0.6, 0.25], [0.125, 0.75]], chosen=[0, 1], masked=[[], [0]], support=[1], prediction="hallway",
              probability=0.75, max_hops=2, stop_reason="max hops", hop_answers=[("kitchen", 0.5), ("hallway", 0.75)],
              label="test #1")
    # the story allows one answer: no flag; 0.6 is not dark enough for white ink (> 0.6 is)
    assert report._table_html(t, ["hallway"]) == "\n".join([
        '<section class="question right">',
        "<h3>test #1: Where is Mary?</h3>",
        '<div>predicted <b>hallway</b> (0.75), gold <b>hallway</b> <span class="verdict right">✓</span> · 2 of 2 hops '
        "(max hops)</div>",
        '<table class="attention"><tr><th>id</th><th>sentence</th><th>gold</th><th>hop 1</th><th>hop 2</th></tr>',
        '<tr><td class="num">1</td><td>Mary went to the kitchen.</td><td class="gold"></td>'
        '<td class="w chosen" style="background:rgba(31,119,180,0.600);color:#222">0.60</td>'
        '<td class="w masked" style="background:rgba(31,119,180,0.125);color:#222">0.12</td></tr>',
        '<tr><td class="num">3</td><td>Mary moved.</td><td class="gold">1</td>'
        '<td class="w " style="background:rgba(31,119,180,0.250);color:#222">0.25</td>'
        '<td class="w chosen" style="background:rgba(31,119,180,0.750);color:#fff">0.75</td></tr>',
        # the weight on the null memory, as inspect's table shows it
        '<tr class="nothing"><td></td><td><i>(nothing: the null memory)</i></td><td></td>'
        '<td class="w" style="background:rgba(31,119,180,0.062);color:#222">0.06</td>'
        '<td class="w" style="background:rgba(31,119,180,0.200);color:#222">0.20</td></tr></table>',
        '<div class="hops">had it stopped after: hop 1 → kitchen (0.50), hop 2 → hallway (0.75)</div>',
        "</section>"])
    # a transformer's columns are layers
    assert "<th>gold</th><th>layer 1</th><th>layer 2</th></tr>" in report._table_html(replace(t, step="layer"), [])


def test_html_gold_answer_and_its_flag():
    assert "gold <b>none given</b> " in report._table_html(table(answer=None), [])
    flagged = report._table_html(table(), ["kitchen", "hallway"])
    assert ('gold <b>kitchen <span class="flag" title="the solver of memnet check: the story allows several answers">'
            "⚑ ambiguous: the story allows kitchen or hallway</span></b> "
            '<span class="verdict ambiguous">≈ the story allows this answer too</span>') in flagged


def test_report_verdict():
    assert report._verdict(table(prediction="kitchen"), []) == "right"
    assert report._verdict(table(prediction="kitchen"), ["kitchen", "hallway"]) == "right"
    assert report._verdict(table(), []) == "wrong"
    assert report._verdict(table(), ["kitchen", "hallway"]) == "ambiguous"  # hallway: another answer the story allows
    assert report._verdict(table(prediction="garden"), ["kitchen", "hallway"]) == "wrong"  # one it does not allow
    # a story that allows one answer is not ambiguous: the gold answer decides, even where the solver's
    # answer (hallway) is the prediction
    assert report._verdict(table(), ["hallway"]) == "wrong"
    assert report._verdict(table(answer=None), []) == "wrong"  # no gold answer: nothing says it is right


# ---------------------------------------------------------------------------- metrics


def hand_made(choice, support, n_support, hops_used, answers=(0, 0), hop_answers=((0, 0), (0, 0))):
    """Two questions, 2 hops, 3 memory slots, attention one-hot at `choice` (N, K), each hop's
    answer class `hop_answers` (N, K); `support` may have more or fewer columns than hops."""
    attention = torch.nn.functional.one_hot(torch.tensor(choice), 3).float()
    hops = torch.tensor(hops_used)
    attention *= (torch.arange(2) < hops[:, None])[..., None]
    result = Result(logits=torch.tensor([[1.0, 0.0], [0.0, 1.0]]), attention=attention, hops_used=hops,
                    halted=hops < 2, hop_logits=torch.nn.functional.one_hot(torch.tensor(hop_answers), 2).float(),
                    halt_probs=torch.zeros(2, 2), loss=None)
    batch = Batch(story=torch.zeros(2, 3, 1, dtype=torch.long), query=torch.zeros(2, 1, dtype=torch.long),
                  length=torch.tensor([3, 3]), answer=torch.tensor(answers), support=torch.tensor(support),
                  n_support=torch.tensor(n_support), task=torch.tensor([2, 3]), time=torch.zeros(2, 3, dtype=torch.long))
    return metrics(result, batch)


def test_support_recall_counts_a_fact_two_hops_chose_once():
    # question 0: both hops chose slot 0, one of its two facts (0, 1); question 1: one fact, found
    m = hand_made(choice=[[0, 0], [2, 1]], support=[[0, 1], [2, -1]], n_support=[2, 1], hops_used=[2, 2])
    assert m["support_recall"] == pytest.approx(2 / 3)  # facts found: 1 + 1 of 3, not 2 + 1
    assert m["tasks"]["2"]["support_recall"] == pytest.approx(1 / 2)
    assert m["hop_accuracy"] == pytest.approx([1.0, 0.0]) and m["chain_accuracy"] == pytest.approx(1 / 2)
    assert m["accuracy"] == pytest.approx(1 / 2) and m["error"] == pytest.approx(1 / 2)
    # a hop not taken finds nothing
    m = hand_made(choice=[[0, 1], [2, 1]], support=[[0, 1], [2, -1]], n_support=[2, 1], hops_used=[1, 2])
    assert m["support_recall"] == pytest.approx(2 / 3) and m["hop_accuracy"] == pytest.approx([1.0, 0.0])
    assert m["mean_hops"] == 1.5 and m["mean_facts"] == 1.5 and m["chain_accuracy"] == 1.0


def test_task_and_hops_tables_carry_the_metrics():
    m = hand_made(choice=[[0, 0], [2, 1]], support=[[0, 1], [2, -1]], n_support=[2, 1], hops_used=[1, 2], answers=(0, 0))
    rows = [line.split() for line in task_table(m).splitlines()]
    assert rows[0] == ["task", "n", "acc", "error", "hop", "acc", "chain", "recall", "hops", "facts"]
    # task 2: right; hop 2 not taken, so its second fact is missed (hop acc 0) yet the chain
    # holds (one hop used, one right); recall 1 of 2 facts. Task 3: wrong answer, no second fact
    assert rows[1] == ["2", "1", "100.0", "0.0", "100.0", "0.0", "100.0", "50.0", "1.00", "2.00"]
    assert rows[2] == ["3", "1", "0.0", "100.0", "100.0", "-", "100.0", "100.0", "2.00", "1.00"]
    assert rows[3] == ["all", "2", "50.0", "50.0", "100.0", "0.0", "100.0", "66.7", "1.50", "1.50"]
    m = hand_made(choice=[[0, 2], [2, 1]], support=[[0, 1], [-1, -1]], n_support=[2, 0], hops_used=[2, 2])
    rows = [line.split() for line in task_table(m).splitlines()]
    assert rows[1] == ["2", "1", "100.0", "0.0", "100.0", "0.0", "0.0", "50.0", "2.00", "2.00"]
    assert rows[2] == ["3", "1", "0.0", "100.0", "-", "-", "100.0", "-", "2.00", "0.00"]  # no facts: no recall
    assert rows[3] == ["all", "2", "50.0", "50.0", "100.0", "0.0", "50.0", "50.0", "2.00", "1.00"]
    m = hand_made(choice=[[0, 0], [2, 1]], support=[[0, 1], [2, -1]], n_support=[2, 1], hops_used=[1, 2], answers=(0, 0))
    lines = [line.split() for line in hops_table(m).splitlines()]
    assert lines[1] == ["task", "facts", "n", "mean", "1", "hop", "2", "hops"]
    assert lines[2:] == [["2", "2", "1", "1.00", "1", "0"], ["3", "1", "1", "2.00", "0", "1"]]


def test_each_hops_answer_is_scored_taken_or_not():
    # question 0 (task 2) stops after hop 1, right there and wrong at hop 2; question 1 (task 3)
    # is wrong at hop 1 and right at hop 2: the answer had each stopped after hop k
    m = hand_made(choice=[[0, 0], [2, 1]], support=[[0, 1], [2, -1]], n_support=[2, 1], hops_used=[1, 2],
                  answers=(0, 1), hop_answers=((0, 1), (0, 1)))
    assert m["hop_answer_accuracy"] == pytest.approx([0.5, 0.5])
    assert m["tasks"]["2"]["hop_answer_accuracy"] == pytest.approx([1.0, 0.0])
    assert m["tasks"]["3"]["hop_answer_accuracy"] == pytest.approx([0.0, 1.0])
    lines = [line.split() for line in hop_answers_table(m).splitlines()]
    assert lines[1:] == [["task", "n", "hop", "1", "hop", "2"], ["2", "1", "100.0", "0.0"], ["3", "1", "0.0", "100.0"],
                         ["all", "2", "50.0", "50.0"]]


def test_metrics_with_more_facts_than_hops_and_fewer():
    # three facts, two hops: the third fact is counted by recall, never by a hop
    m = hand_made(choice=[[0, 1], [2, 1]], support=[[0, 1, 2], [2, -1, -1]], n_support=[3, 1], hops_used=[2, 2])
    assert m["hop_accuracy"] == pytest.approx([1.0, 1.0]) and m["support_recall"] == pytest.approx(3 / 4)
    assert m["chain_accuracy"] == 1.0  # two hops used, both right
    # one support column for two hops
    m = hand_made(choice=[[0, 1], [2, 1]], support=[[0], [1]], n_support=[1, 1], hops_used=[2, 2])
    # question 1 finds its fact at hop 2, not hop 1: recall yes, hop 1 and the chain no
    assert m["hop_accuracy"] == [0.5, None] and m["support_recall"] == 1.0 and m["chain_accuracy"] == 0.5


def test_metrics_of_no_questions_are_zeros_not_nan():
    result = Result(logits=torch.zeros(0, 2), attention=torch.zeros(0, 2, 3), hops_used=torch.zeros(0, dtype=torch.long),
                    halted=torch.zeros(0, dtype=torch.bool), hop_logits=torch.zeros(0, 2, 2), halt_probs=torch.zeros(0, 2),
                    loss=None)
    batch = Batch(story=torch.zeros(0, 3, 1, dtype=torch.long), query=torch.zeros(0, 1, dtype=torch.long),
                  length=torch.zeros(0, dtype=torch.long), answer=torch.zeros(0, dtype=torch.long),
                  support=torch.zeros(0, 2, dtype=torch.long), n_support=torch.zeros(0, dtype=torch.long),
                  task=torch.zeros(0, dtype=torch.long), time=torch.zeros(0, 3, dtype=torch.long))
    m = metrics(result, batch)
    assert (m["n"], m["accuracy"], m["error"], m["chain_accuracy"], m["mean_hops"], m["mean_facts"]) == (0, 0.0, 1.0, 0.0, 0.0, 0.0)
    assert m["support_recall"] is None and m["hop_accuracy"] == [None, None] and m["tasks"] == {}


def test_evaluate_and_accuracy_on_questions_without_answers():
    from memnet.evaluation import accuracy, evaluate
    from memnet.models import MemN2N
    model = MemN2N(config.load(None, {"model.dim": 4, "model.hops": 2}).model, vocab_size=6, answer_words=[[4], [5], [3]],
                   memory_size=3)
    batch = Batch(story=torch.tensor([[[1, 2], [3, 0], [0, 0]], [[2, 2], [4, 5], [0, 0]], [[5, 1], [0, 0], [0, 0]]]),
                  query=torch.tensor([[1, 3], [2, 0], [4, 4]]), length=torch.tensor([2, 2, 1]),
                  answer=torch.tensor([-1, -1, -1]), support=torch.tensor([[0], [1], [0]]),
                  n_support=torch.tensor([1, 1, 1]), task=torch.tensor([1, 1, 1]), time=torch.tensor([[0, 1, 2]] * 3))
    m = evaluate(model, batch)  # no answers: no loss, and every question counts as wrong
    assert m["accuracy"] == 0.0 and m["n"] == 3 and accuracy(model, batch) == 0.0
    predicted = model(batch).logits.argmax(-1)
    batch.answer = torch.stack([predicted[0], (predicted[1] + 1) % 3, (predicted[2] + 2) % 3])  # the first right
    assert evaluate(model, batch)["accuracy"] == pytest.approx(1 / 3) and accuracy(model, batch) == pytest.approx(1 / 3)


# ---------------------------------------------------------------------------- the memnet-2 format


def tiny_vocab():
    from memnet.data import Vocab
    return Vocab(["<pad>", "<unk>", "mary", "went", "kitchen", "garden"], ["garden", "kitchen"])


VOCAB = tiny_vocab()


def memn2n(seed: int, **kw):
    from memnet.models import MemN2N
    cfg = config.load(None, {"model.null_memory": False, **{f"model.{k}": v for k, v in kw.items()}})
    m = MemN2N(cfg.model, vocab_size=len(VOCAB), answer_words=VOCAB.answer_words(), memory_size=50)
    m.reset_parameters(torch.Generator().manual_seed(seed))
    if kw.get("masking") in ("soft", "second"):
        with torch.no_grad():
            m.masking.log_penalty.fill_(0.1 * seed + 0.3)
    return m


OLD_NAMES = {"halting.w": "halt_w", "halting.b": "halt_b", "masking.log_penalty": "log_penalty", "answer.U": "answer_in",
             "answer.b": "answer_in_b", "answer.V": "answer_out", "pointer.w": "relative", "attention.gate": "stick_gate"}


def format_2(tmp_path, model, model_section: dict, second: bool | None = None) -> Path:
    """A memnet-2 checkpoint of a model: the parameters under their memnet-2 names, and with
    `second` the switch model.second_alternate kept in the state."""
    state = {OLD_NAMES.get(k, k): v for k, v in model.state_dict().items()}
    if second is not None:
        state["second"] = torch.tensor(float(second))
    section = {"type": "memn2n", "alternate_init": True, "stick_alternate": -2.0, "answer_rows": "last",
               "answer_reads": "current", "mask_linear_start": True, **model_section}
    path = tmp_path / "old.pt"
    torch.save({"format": "memnet-2", "state_dict": state, "vocab": VOCAB.to_dict(),
                "config": {"data": {}, "train": {"joint_dim": 50, "joint_ideas": False}, "model": section}}, path)
    return path


@pytest.mark.parametrize("second", [False, True])
def test_a_format_2_checkpoint_loads_and_answers_as_it_did(tmp_path, second):
    kw = dict(hops=3, dim=5, masking="second" if second else "soft", stopping=True, halt_training="right",
              attention="mixed", relative_time=2, answer_hidden=4, answer_from="question")
    model = memn2n(3, **kw)
    section = {**kw, "masking": "soft", "second_alternate": True, "null_memory": False}
    loaded, cfg, _, payload = checkpoint.load(format_2(tmp_path, model, section, second))
    assert payload["format"] == checkpoint.FORMAT and cfg.model.masking == ("second" if second else "soft")
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    from memnet.data import encode_samples
    samples = list(babi.samples(babi.parse_lines(["1 mary went kitchen.", "2 mary went garden.",
                                                   "3 where mary?\tgarden\t2"])))
    batch = encode_samples(samples, VOCAB, memory_size=50)
    assert torch.equal(loaded(batch).attention, model.eval()(batch).attention)


def test_a_format_2_checkpoint_of_a_dropped_switch_is_refused_by_name(tmp_path):
    path = format_2(tmp_path, memn2n(0, dim=4), {"dim": 4, "answer_rows": "own"})
    with pytest.raises(MemnetError, match=r"old.pt: written by an earlier memnet with model.answer_rows own, which "
                                          r"this version no longer has; retrain it"):
        checkpoint.load(path)


def test_checkpoint_save_load_and_what_does_not_load(tmp_path):
    cfg = config.load(None, {"model.dim": 4, "model.hops": 2})
    model = memn2n(0, dim=4, hops=2)
    checkpoint.save(tmp_path / "m.pt", model, cfg, VOCAB, step=9, best_metric=0.625)
    loaded, cfg2, vocab, payload = checkpoint.load(tmp_path / "m.pt")
    assert (payload["step"], payload["best_metric"], cfg2, vocab.itos) == (9, 0.625, cfg, VOCAB.itos)
    assert not loaded.training and checkpoint.nonfinite(loaded) == []
    with torch.no_grad():
        loaded.tables[0, 2, 1] = float("nan")
    assert checkpoint.nonfinite(loaded) == ["tables"]
    # a config that no longer loads, weights of another shape: named, with the first line of why
    checkpoint.write(tmp_path / "c.pt", {**payload, "config": {**payload["config"], "model": {"hops": 99}}})
    with pytest.raises(MemnetError) as error:
        checkpoint.load(tmp_path / "c.pt")
    assert str(error.value) == (f"{tmp_path / 'c.pt'}: the checkpoint's config does not load "
                                "(model.hops: expected between 1 and 20, found 99)")
    checkpoint.write(tmp_path / "s.pt", {**payload, "config": {**payload["config"], "model": {"dim": 5, "hops": 2}}})
    with pytest.raises(MemnetError) as error:
        checkpoint.load(tmp_path / "s.pt")
    assert str(error.value) == (f"{tmp_path / 's.pt'}: checkpoint does not match this version of memnet "
                                "(RuntimeError: Error(s) in loading state_dict for MemN2N:)")
    checkpoint.write(tmp_path / "v.pt", {**payload, "vocab": {}})
    with pytest.raises(MemnetError) as error:
        checkpoint.load(tmp_path / "v.pt")
    assert str(error.value) == f"{tmp_path / 'v.pt'}: checkpoint does not match this version of memnet (KeyError: 'itos')"


def test_errors_without_a_message_are_named_by_their_type(tmp_path, monkeypatch):
    cfg = config.load(None, {"model.dim": 4, "model.hops": 2})
    checkpoint.save(tmp_path / "m.pt", memn2n(0, dim=4, hops=2), cfg, VOCAB, step=1, best_metric=0.5)

    def fails(*args, **kwargs):
        raise TypeError()

    monkeypatch.setattr(checkpoint, "build_model", fails)
    with pytest.raises(MemnetError) as error:
        checkpoint.load(tmp_path / "m.pt")
    assert str(error.value) == f"{tmp_path / 'm.pt'}: checkpoint does not match this version of memnet (TypeError: )"

    def eof(*args, **kwargs):
        raise EOFError()

    monkeypatch.setattr(checkpoint.torch, "load", eof)
    with pytest.raises(MemnetError) as error:
        checkpoint.read(tmp_path / "m.pt")
    assert str(error.value) == f"{tmp_path / 'm.pt'}: not a readable memnet checkpoint (EOFError)"



@pytest.mark.parametrize("overrides, line", [
    ({}, (3, "MemN2N, d = 20, 3 hops, stopping rule off, no masking, position encoding, temporal encoding, "
             "adjacent tying, softmax attention, a null memory")),
    ({"model.stopping": True, "model.masking": "hard", "model.hops": 4, "model.dim": 8, "model.encoding": "bow",
      "model.temporal": False, "model.null_memory": False, "model.tying": "layerwise"},
     (4, "MemN2N, d = 8, 4 hops, stopping rule on, hard masking, bag of words, layerwise tying, softmax attention")),
    ({"model.stopping": True, "model.masking": "second", "model.halt_training": "right", "model.hops": 1,
      "model.attention": "mixed", "model.relative_time": 5, "model.answer_hidden": 64},
     (1, "MemN2N, d = 20, 1 hop, stopping rule on, soft masking (hard at hop 2), position encoding, temporal encoding, "
         "adjacent tying, attention mixing softmax and stick-breaking, a null memory, a pointer in time (±5), "
         "an answer module of 64 units")),
    ({"model.masking": "soft", "model.attention": "stick"},
     (3, "MemN2N, d = 20, 3 hops, stopping rule off, soft masking, position encoding, temporal encoding, adjacent "
         "tying, stick-breaking attention, a null memory")),
    ({"model.type": "transformer"}, (2, "Transformer, d = 20, 2 layers, 2 heads, stopping rule off, position encoding")),
    ({"model.type": "transformer", "model.layers": 1, "model.encoding": "bow"},
     (1, "Transformer, d = 20, 1 layer, 2 heads, stopping rule off, bag of words")),
    ({"model.type": "universal", "model.layers": 3, "model.stopping": True},
     (3, "Universal Transformer, d = 20, 3 steps of one shared layer, 2 heads, stopping rule on, position encoding")),
    ({"model.type": "universal", "model.act": True, "model.heads": 4, "model.encoding": "mask"},
     (2, "Universal Transformer, d = 20, 2 steps of one shared layer, 4 heads, ACT halting per position, "
         "learned word masks")),
])
def test_the_reports_setting_line(overrides, line):
    from memnet import config, report
    assert report.describe(config.load(None, overrides)) == line
