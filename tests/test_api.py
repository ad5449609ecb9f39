"""The Python API (memnet/api.py): docs/api.md's example runs, and each function's contract and errors."""
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import memnet
from memnet import generator
from memnet.babi import Sample, Story
from memnet.config import Config, ConfigError
from memnet.errors import MemnetError

ROOT = Path(__file__).resolve().parents[1]
TINY = {"train_epochs": 2, "train_eval_every": 2, "train_restarts": 1, "train_linear_start_epochs": 0}


def test_the_worked_example_of_docs_api_md_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert len(blocks) == 1
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "docs/api.md", "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"^test accuracy \d\.\d\d$", out, re.M)
    assert re.search(r"^\w+ \d\.\d+ after [123] hops$", out, re.M)
    assert "True the story never mentions Greg" in out
    assert "Q: What color is" in out and "gold: " in out  # the data set's question, with its gold answer
    assert (tmp_path / "runs" / "tiny" / "model.pt").is_file()


def test_import_memnet_and_generate_do_not_load_torch():
    code = ("import sys, memnet; memnet.generate(1, 5, seed=0); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numba'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_api_names_are_the_package_s():
    assert set(memnet.__all__) <= set(dir(memnet))
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        memnet.nonsense
    from memnet import api, trainer  # the training loop's own module: importing it leaves memnet.train the API's
    assert memnet.train is api.train and trainer.train is not api.train


# ---------------------------------------------------------------------------- data


def test_generate_is_the_generator_and_writes_what_memnet_generate_writes(tmp_path):
    stories = memnet.generate(16, 30, seed=4, split="test", out=tmp_path / "api")
    assert all(isinstance(s, Story) for s in stories) and sum(len(s.questions) for s in stories) == 30
    assert stories == generator.generate(16, 30, 4, "test")
    generator.write_dataset(tmp_path / "cli", 16, train=0, test=30, seed=4)
    name = "qa16_basic-induction_test.txt"
    assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    assert memnet.generate("chain", 3, seed=0, hops=2)


@pytest.mark.parametrize("args, kwargs, message", [
    ((16, 5), {"split": "dev"}, "split: expected one of train, valid, test, found 'dev'"),
    ((21, 5), {}, "task: expected numbers between 1 and 20"),
    ((1, 5), {"actors": 0}, "actors: expected 1 to 1000, found 0"),
    ((1, 5), {"colour": 1}, "colour: not a knob of the generator (questions, length, actors, distractors, hops)"),
    (("1-3", 5), {}, "task: expected one task, found '1-3'"),
    ((1, 0), {}, "n: expected at least 1 question, found 0"),
    ((1, 5), {"distractors": 3}, "distractors: task 1 (single supporting fact) takes no distractors; its knobs are "
                                 "questions, length, actors"),
    ((16, 5), {"hops": 2}, "hops: task 16 (basic induction) takes no hops; its knob is actors"),
])
def test_generate_refuses_what_it_cannot_generate(args, kwargs, message, tmp_path):
    with pytest.raises(MemnetError, match=re.escape(message)):
        memnet.generate(*args, **kwargs, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_load_tasks_reads_a_folder_as_training_splits_it(tmp_path, babi_fixtures):
    folder = babi_fixtures / "en-valid"
    test = memnet.load_tasks(folder, 1, split="test")
    assert test and all(isinstance(s, Sample) and s.question.answer for s in test)
    assert memnet.load_tasks(folder, "1", split="valid")  # the folder's own valid file
    memnet.generate(1, 100, seed=0, out=tmp_path)  # no valid file: a tenth of train's stories
    train, valid = memnet.load_tasks(tmp_path, 1), memnet.load_tasks(tmp_path, 1, split="valid")
    assert len(train) + len(valid) == 100 and 0 < len(valid) < 20


@pytest.mark.parametrize("args, message", [
    (("en-vaild", 1), "did you mean en-valid?"),
    (("{fixtures}", "1,2"), "task: expected one task, found '1,2'"),
    (("{fixtures}", 1, "dev"), "split: expected one of train, valid, test"),
    (("{fixtures}", 7), "a train file for task 7"),
])
def test_load_tasks_errors_name_the_cause(babi_fixtures, args, message):
    args = tuple(str(babi_fixtures / "en-valid") if a == "{fixtures}" else a for a in args)
    with pytest.raises(MemnetError, match=re.escape(message)):
        memnet.load_tasks(*args)


# ---------------------------------------------------------------------------- train


@pytest.fixture(scope="module")
def qa1_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api_qa1")
    memnet.generate(1, 200, seed=0, out=folder)
    memnet.generate(1, 40, seed=0, split="test", out=folder)
    return folder


def test_train_returns_a_run_that_answers(tmp_path, qa1_data):
    run = memnet.train("demo", {"model.hops": 2}, data=qa1_data, task=1, out=tmp_path / "run", quiet=True, **TINY)
    assert isinstance(run, memnet.Run) and run.path == tmp_path / "run"
    assert run.config.model.hops == 2 and run.config.train.epochs == 2 and run.config.data.task == "1"
    assert run.config.data.dir == str(qa1_data.resolve())
    assert {"valid", "test", "best_seed"} <= set(run.metrics) and "model" not in run.metrics
    assert run.vocab is run.model.vocab and "kitchen" in run.vocab.stoi
    assert (tmp_path / "run" / "model.pt").is_file() and run.model.path == tmp_path / "run" / "model.pt"
    answer = run.answer("Mary went to the kitchen.", "Where is Mary?", min_probability=0)
    assert not answer.declined and answer.answer in run.vocab.answers and 0 < answer.probability <= 1
    with pytest.raises(MemnetError, match="holds another run"):
        memnet.train("demo", data=qa1_data, task=1, out=tmp_path / "run", quiet=True, **TINY)
    again = memnet.train(run.config, data=qa1_data, out=tmp_path / "run", force=True, quiet=True)  # a Config
    assert again.config.model.hops == 2


def test_train_without_out_writes_nothing(tmp_path, qa1_data, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = memnet.train(None, data=qa1_data, task=1, quiet=True, **TINY)  # None: the built-in defaults
    assert run.path is None and run.model.path is None and list(tmp_path.iterdir()) == []
    assert run.config.model.dim == Config().model.dim


@pytest.mark.parametrize("config, kwargs, error, message", [
    ("nonsense", {}, ConfigError, "config nonsense: no such preset or file"),
    ("dmo", {}, ConfigError, "did you mean demo?"),
    ("missing.yaml", {}, ConfigError, "missing.yaml: no such config file"),
    ("demo", {"overrides": {"model.hopz": 4}}, ConfigError, "model.hopz"),
    ("demo", {"model_hopz": 4}, ConfigError, "model.hopz"),
    ("demo", {"hops": 4}, ConfigError, "hops: expected a keyword section_key (data_, model_ or train_ and a field); "
                                       "did you mean model_hops?"),
    ("demo", {"model_hops": "many"}, ConfigError, "model.hops"),
    ("demo", {"data": "en-vaild"}, MemnetError, "did you mean en-valid?"),
])
def test_train_refuses_a_bad_config_before_training(config, kwargs, error, message, qa1_data):
    kwargs = {"data": qa1_data, "task": 1, **kwargs}
    with pytest.raises(error, match=re.escape(message)):
        memnet.train(config, **kwargs)


# ---------------------------------------------------------------------------- load and answer


@pytest.fixture(scope="module")
def qa16(inspect_run):
    return memnet.load(inspect_run["checkpoint"].parent)  # the run folder


def test_load_takes_a_run_folder_or_its_checkpoint(inspect_run, qa16):
    assert isinstance(qa16, memnet.Model) and qa16.path == inspect_run["checkpoint"]
    assert qa16.config.data.task == "16" and "frog" in qa16.vocab.stoi and "16" in repr(qa16)
    assert memnet.load(inspect_run["checkpoint"]).vocab.itos == qa16.vocab.itos


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "missing.pt", "missing.pt: expected a checkpoint file (RUN/model.pt), found no such file"),
    (lambda tmp: tmp, "expected a checkpoint file (RUN/model.pt), found a folder"),  # a folder without model.pt
    (lambda tmp: "", "expected a checkpoint file or a run folder, found an empty string"),
])
def test_load_errors_name_the_cause(tmp_path, make, message):
    with pytest.raises(MemnetError, match=re.escape(message)):
        memnet.load(make(tmp_path))


STORY = ["Brian is a frog.", "Lily is gray.", "Brian is yellow.", "Greg is a frog."]


def test_answer_has_the_answer_hops_and_attention(qa16):
    answer = qa16.answer("1 Brian is a frog.\n\n2 Lily is gray.\n3 Brian is yellow.\n4 Greg is a frog.\n",
                         "What color is Greg?", min_probability=0)
    assert not answer.declined and answer.reason == "" and answer.answer == answer.guess
    assert 1 <= answer.hops <= qa16.config.model.hops and 0 < answer.probability <= 1
    rows = answer.table()  # pandas is not a dependency: plain rows without it
    assert isinstance(rows, list) if "pandas" not in sys.modules else True
    memories = answer.rows()[:4]  # then the null memory's row, where a hop read some of it
    assert [r["sentence"] for r in memories] == STORY and [r["id"] for r in memories] == [1, 2, 3, 4]
    assert answer.inspection.reads_nothing == (answer.rows()[4:] != [])
    hops = [f"hop {k + 1}" for k in range(answer.hops)]
    assert all(set(r) == {"id", "sentence", *hops} for r in answer.rows())
    for hop in hops:
        assert sum(r[hop] for r in answer.rows()) == pytest.approx(1, abs=0.02)
    assert answer.rows() == qa16.answer(STORY, "What color is Greg?", min_probability=0).rows()  # list == string
    assert "Q: What color is Greg?" in str(answer) and f"answer: {answer.answer}" in str(answer)


def test_answer_table_is_a_dataframe_where_pandas_is_installed(qa16, monkeypatch):
    made = []
    fake = types.ModuleType("pandas")
    fake.DataFrame = lambda rows, columns: made.append((rows, columns)) or "frame"
    monkeypatch.setitem(sys.modules, "pandas", fake)
    answer = qa16.answer(STORY, "What color is Greg?", min_probability=0)
    assert answer.table() == "frame"
    assert made == [(answer.rows(), ["id", "sentence", *(f"hop {k + 1}" for k in range(answer.hops))])]
    monkeypatch.setitem(sys.modules, "pandas", None)  # not installed: plain rows
    assert answer.table() == answer.rows()


def test_answer_plot_is_the_heat_map_of_inspect(qa16, tmp_path):
    from matplotlib.figure import Figure

    answer = qa16.answer(STORY, "What color is Greg?", min_probability=0)
    assert isinstance(answer.plot(), Figure)
    assert isinstance(answer.plot(tmp_path / "greg.png"), Figure)
    assert (tmp_path / "greg.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("story, question, reason", [
    (STORY[:3], "What color is Greg?", "the story never mentions Greg"),
    (STORY, "Where is Greg?", "the model was never asked a question like 'Where is Greg?'"),
    (STORY[:3], "What color is Zorro?", "the story never mentions Zorro (and the model never saw 'zorro')"),
    ([], "What color is Greg?", "the story has no sentences before the question"),
])
def test_answer_declines_as_ask_does(qa16, story, question, reason):
    answer = qa16.answer(story, question)
    assert answer.declined and answer.answer is None and answer.reason.startswith(reason)
    assert answer.hops == 0 and answer.probability is None and answer.rows() == [] and answer.table() == []
    assert f"cannot answer: {answer.reason}" in str(answer)
    with pytest.raises(MemnetError, match="nothing to draw: cannot answer: "):
        answer.plot()


def test_answer_declines_an_unsure_answer_and_keeps_its_guess(qa16):
    answer = qa16.answer(STORY, "What color is Greg?", min_probability=1)
    assert answer.declined and answer.answer is None and answer.guess in qa16.vocab.answers
    assert answer.reason.startswith("the model is not sure") and "under min_probability 1.00" in answer.reason
    assert answer.rows() and answer.hops >= 1


def test_answer_reads_other_spellings_with_a_note(qa16):
    answer = qa16.answer(STORY, "What colour is Greg?", min_probability=0)
    assert not answer.declined and answer.question == "What color is Greg?"
    assert answer.notes == ["reading 'colour' as 'color'"] and "note: reading 'colour'" in str(answer)


def test_the_qa1_model_declines_a_name_the_story_never_mentions(qa1_run):
    answer = memnet.load(qa1_run["checkpoint"]).answer(["John went to the kitchen."], "Where is Sandra?")
    assert answer.declined and answer.reason == "the story never mentions Sandra"


@pytest.mark.parametrize("story, question, message", [
    (["Brian is a frog.", "Where is Brian?"], "What color is Brian?", "story line 2: 'Where is Brian?' is a question"),
    (["What color is Brian"], "What color is Brian?", "story line 1: 'What color is Brian' reads like a question"),
    (STORY, "What color is Greg", "question: 'What color is Greg' reads like a question; end it with '?'"),
    (STORY, "Brian is a frog.", "question: expected a question ending in '?', found 'Brian is a frog.'"),
    (STORY, "What color is Greg? yellow 4 1 3", "has words after its '?'"),
    (STORY, None, "question: expected a string, found NoneType"),
])
def test_answer_refuses_a_malformed_story_or_question(qa16, story, question, message):
    with pytest.raises(MemnetError, match=re.escape(message)):
        qa16.answer(story, question)


def test_answer_takes_a_sample_of_the_data_set(qa16, inspect_run):
    sample = memnet.load_tasks(inspect_run["data"], 16, split="test")[0]
    answer = qa16.answer(sample, min_probability=0)
    assert answer.inspection.answer == sample.question.answer and "gold: " in str(answer)
    with pytest.raises(MemnetError, match="a Sample holds its own question"):
        qa16.answer(sample, "What color is Greg?")
