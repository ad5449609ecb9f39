"""`memnet bench` end to end on tiny generated data (qa1 and qa2, two seed sets, 2 epochs), its
resume, its processes, its table from records, the choice on valid, joint runs (--joint), and
training on generated stories with --train-on (memnet.bench, memnet.train_on)."""
import contextlib
import hashlib
import io
import json
import re
import shutil

import pytest

from memnet import babi, bench, generator, train_on, trainer
from memnet.cli import main
from memnet.data import Vocab

TINY = ["--set", "train.epochs=2", "--set", "train.linear_start_epochs=0", "--set", "train.restarts=1",
        "--set", "model.dim=8"]
# what a run computes (not how long it took, nor where)
FIGURES = ("task", "set", "valid_error", "test_error", "mean_hops", "hop_accuracy", "preset_hash")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """qa1 and qa2 with train, valid and test files (official names), small enough to train in a second."""
    folder = tmp_path_factory.mktemp("bench_data")
    for task in (1, 2):
        generator.write_dataset(folder, task, train=200, valid=50, test=50, seed=0)
    return folder


def bench_args(data, out, *more):
    return ["bench", "--tasks", "1,2", "--sets", "2", "--data", str(data), "--out", str(out), *TINY, *more]


@pytest.fixture(scope="module")
def serial(data, tmp_path_factory):
    """One bench run, one job at a time: {out, stdout}."""
    return bench_run(data, tmp_path_factory.mktemp("bench") / "out")


def bench_run(data, out, *more):
    """A bench of bench_args that must succeed: {out, stdout}."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(bench_args(data, out, *more)) == 0
    return {"out": out, "stdout": stdout.getvalue()}


def records(out):
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def table_part(stdout):
    """The table a run printed after its progress lines."""
    return stdout[stdout.index("default ("):]


def test_a_bench_records_every_task_and_set(serial, data):
    rs = records(serial["out"])
    assert sorted((r["task"], r["set"]) for r in rs) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for r in rs:
        assert r["preset"] == "default" and re.fullmatch(r"[0-9a-f]{64}", r["preset_hash"])
        assert r["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", r["commit"])
        assert r["seed"] == 100 * r["set"] and r["restarts"] == 1 and r["data"] == data.name
        assert r["test_questions"] == 50
        wrong = r["test_error"] * 50  # a count of wrong answers
        assert wrong == pytest.approx(round(wrong)) and r["failed"] == (r["test_error"] > 0.05)
        assert 0 <= r["valid_error"] <= 1 and 1 <= r["mean_hops"] <= 3 and len(r["hop_accuracy"]) == 3
        assert 0 <= r["hops_match_facts"] <= 1 and r["seconds"] >= 0
    assert len({r["preset_hash"] for r in rs}) == 1
    saved = serial["out"] / "presets" / f"default-{rs[0]['preset_hash'][:12]}.yaml"
    assert "epochs: 2" in saved.read_text()
    assert "[4/4] default qa" in serial["stdout"]


def test_the_printed_table_holds_the_records_means(serial):
    rs = records(serial["out"])
    stdout = serial["stdout"]
    assert "over 2 seed sets (train.seed 0, 100)" in stdout
    rows = {line.split()[0]: line.split() for line in table_part(stdout).splitlines()[2:5]}
    for task in (1, 2):
        errors = [100 * r["test_error"] for r in rs if r["task"] == task]
        assert float(rows[str(task)][1]) == pytest.approx(sum(errors) / 2, abs=0.005)
        assert rows[str(task)][2] == f"{min(errors):.2f}-{max(errors):.2f}"
    per_set = [sum(100 * r["test_error"] for r in rs if r["set"] == k) / 2 for k in (0, 1)]
    assert float(rows["mean"][1]) == pytest.approx(sum(per_set) / 2, abs=0.005)
    assert rows["mean"][2] == f"{min(per_set):.2f}-{max(per_set):.2f}"


def test_table_from_records_is_the_runs_table(serial, capsys):
    assert main(["bench", "--table", str(serial["out"] / "records.jsonl")]) == 0
    assert capsys.readouterr().out.strip() == table_part(serial["stdout"]).strip()


def test_markdown_table(serial, capsys):
    assert main(["bench", "--table", str(serial["out"] / "records.jsonl"), "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("**default (") and lines[0].endswith("**")
    assert lines[2].startswith("| task | test | range | valid |") and lines[3].startswith("|---|")
    assert [line.split(" | ")[0] for line in lines[4:7]] == ["| 1", "| 2", "| **mean**"]
    plain = table_part(serial["stdout"]).splitlines()
    assert lines[4].split(" | ")[1] == plain[2].split()[1]  # the same figure either way


def test_a_second_run_trains_nothing(serial, data, capsys):
    before = (serial["out"] / "records.jsonl").read_text()
    assert main(bench_args(data, serial["out"])) == 0
    assert "4 jobs: 4 recorded" in capsys.readouterr().out
    assert (serial["out"] / "records.jsonl").read_text() == before


def test_resume_after_an_interrupt(data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    calls = []
    real = bench.run_job

    def stop_at_the_third(job, code):
        calls.append(job.keys[0])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(job, code)

    monkeypatch.setattr(bench, "run_job", stop_at_the_third)
    assert main(bench_args(data, out)) == 130
    assert len(records(out)) == 2
    with open(out / "records.jsonl", "a") as f:  # and a line torn by the kill
        f.write('{"preset": "default", "ta')
    monkeypatch.setattr(bench, "run_job", real)
    assert main(bench_args(data, out)) == 0
    stdout = capsys.readouterr().out
    assert "torn last line" in stdout and "4 jobs: 2 recorded" in stdout and "[2/2]" in stdout
    rs = records(out)
    assert [(r["task"], r["set"]) for r in rs[:2]] == [k[2:4] for k in calls[:2]]
    assert sorted((r["task"], r["set"]) for r in rs) == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_jobs_in_two_processes_give_the_same_records(serial, data, tmp_path, capsys):
    assert main(bench_args(data, tmp_path / "out", "--jobs", "2")) == 0
    assert "2 at a time" in capsys.readouterr().out
    mine = sorted(tuple(r[f] for f in FIGURES) for r in records(tmp_path / "out"))
    assert mine == sorted(tuple(r[f] for f in FIGURES) for r in records(serial["out"]))


def test_a_changed_preset_is_refused_in_the_same_folder(serial, data, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(serial["out"], out)
    assert main(bench_args(data, out, "--set", "model.hops=2")) == 2
    assert "holds preset default with another config" in capsys.readouterr().err


def test_presets_by_name_and_path(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "small.yaml").write_text("model:\n  dim: 8\n")
    monkeypatch.chdir(tmp_path)
    by_name, by_path = bench.load_preset("small"), bench.load_preset(str(tmp_path / "configs" / "small.yaml"))
    assert (by_name.name, by_path.name) == ("small", "small") and by_name.hash == by_path.hash
    assert by_name.values["model"]["dim"] == 8
    # one thread or two computes the same model; another dim does not
    assert bench.load_preset("small", {"train.threads": 2}).hash == by_name.hash
    assert bench.load_preset("small", {"model.dim": 9}).hash != by_name.hash
    assert bench.load_preset("default").values == bench.load_preset(str(bench.ROOT / "config.yaml")).values
    with pytest.raises(bench.MemnetError, match="--config nosuch: no such preset or file.*small"):
        bench.load_preset("nosuch")


def record(preset, task, k, valid, test, **more):
    return {"preset": preset, "preset_hash": preset * 64, "task": task, "set": k, "valid_error": valid,
            "test_error": test, "mean_hops": 2.0, "hop_accuracy": [1.0, 0.5, None], "hops_match_facts": 0.5,
            "data": "en-valid", **more}


def test_table_means_ranges_and_failed_counts():
    rs = [record("a", 1, 0, 0.0, 0.00), record("a", 1, 1, 0.0, 0.10), record("a", 2, 0, 0.1, 0.20),
          record("a", 2, 1, 0.2, 0.04), record("a", 2, 2, 0.0, 0.50)]  # set 2 lacks task 1
    task1, task2, total = bench.table(rs)
    assert (task1.task, task2.task, total.task) == ("1", "2", "mean")
    assert task2.test == {0: 0.2, 1: 0.04, 2: 0.5} and task2.failed == {0: 1, 1: 0, 2: 1}
    assert total.test == pytest.approx({0: 0.1, 1: 0.07}) and total.failed == {0: 1, 1: 1}  # not set 2
    assert total.hop_accuracy == [1.0, 0.5, None]
    text = bench.text(bench.title(rs), [task1, task2, total])
    assert "over 3 seed sets (train.seed 0, 100, 200)" in text
    assert re.search(r"mean\s+8\.50\s+7\.00-10\.00\s+7\.50\s+5\.00-10\.00\s+1\.0 \(1-1\)", text)
    assert re.search(r"\n\s+2\s+24\.67\s+4\.00-50\.00\s+10\.00\s+0\.00-20\.00\s+2/3", text)


def candidates_file(tmp_path, text):
    path = tmp_path / "candidates.yaml"
    path.write_text(text)
    return path


def test_choose_on_valid_never_follows_test(tmp_path, capsys):
    # valid prefers a on task 1 and b on task 2; test would prefer the other every time
    rs = [record("a", 1, 0, 0.01, 0.30), record("b", 1, 0, 0.02, 0.00),
          record("a", 2, 0, 0.05, 0.00), record("b", 2, 0, 0.03, 0.40),
          record("c", 2, 0, 0.00, 0.00)]  # best on valid, not a candidate of task 2
    candidates = bench.read_candidates(candidates_file(tmp_path, "default: [a, b]\n1: [a, b]\n"))
    chosen = bench.choose_on_valid(rs, candidates)
    assert [(r["task"], r["chosen_from"], r["test_error"]) for r in chosen] == [(1, "a", 0.30), (2, "b", 0.40)]
    flipped = [{**r, "test_error": 1 - r["test_error"]} for r in rs]
    assert [r["chosen_from"] for r in bench.choose_on_valid(flipped, candidates)] == ["a", "b"]
    # of equals on valid, the first listed
    ties = [record("a", 1, 0, 0.1, 0.3), record("b", 1, 0, 0.1, 0.0)]
    assert bench.choose_on_valid(ties, {1: ["b", "a"]})[0]["chosen_from"] == "b"

    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rs))
    assert main(["bench", "--table", str(path), "--choose-on-valid", str(tmp_path / "candidates.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("a per-task choice on valid among 2 candidates (a (aaaaaaaaaaaa), b (bbbbbbbbbbbb))")
    assert re.search(r"\n\s*mean\s+35\.00\s+35\.00-35\.00\s+2\.00", out)
    assert re.search(r"\n\s*1\s+30\.00.*\sa 1\n", out)


def test_choose_on_valid_in_a_run_trains_the_candidates(data, tmp_path, monkeypatch, capsys):
    candidates = candidates_file(tmp_path, "default: [default, small]\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "small.yaml").write_text("model:\n  dim: 4\n")
    monkeypatch.chdir(tmp_path)
    assert main(bench_args(data, tmp_path / "out", "--sets", "1", "--choose-on-valid", str(candidates))) == 0
    out = capsys.readouterr().out
    assert "4 jobs" in out and "among 2 candidates" in out
    rs = records(tmp_path / "out")
    for task in (1, 2):
        mine = {r["preset"]: r for r in rs if r["task"] == task}
        best = min(["default", "small"], key=lambda n: (mine[n]["valid_error"], n != "default"))
        assert re.search(rf"\n\s*{task}\s+{100 * mine[best]['test_error']:.2f}\s.*\s{best} 1\n", out)


@pytest.mark.parametrize("args, message", [
    (["--config", "nosuch", "--out", "o"], "--config nosuch: no such preset or file"),
    (["--tasks", "1-30", "--out", "o"], "--tasks: task: expected numbers between 1 and 20"),
    (["--tasks", "1"], "--out: required to train"),
    (["--set", "train.seed=3", "--out", "o"], "--set train.seed: each job sets it"),
    (["--table", "nofile.jsonl"], "nofile.jsonl: cannot read records"),
])
def test_bad_input_is_one_line(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("content, message", [
    (json.dumps(record("a", 1, 0, 0.1, 0.1)) + "\n" + '{"preset": "a", "ta', "records.jsonl:2: a torn last line"),
    ("not json\n", "records.jsonl:1: not a JSON record"),
    ('{"preset": "a"}\n', "records.jsonl:1: not a bench record (preset_hash: expected a string, found None)"),
    ('{"preset": "a", "preset_hash": "x", "task": true}\n', "task: expected a whole number, found True"),
])
def test_bad_records_are_refused(content, message, tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text(content)
    assert main(["bench", "--table", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unknown_and_bad_candidates(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(record("a", 1, 0, 0.1, 0.1)) + "\n")
    for text, message in [("default: [a, zz]\n", "unknown candidate 'zz'"), ("qa1: [a]\n", "'qa1': expected a task"),
                          ("1: a\n", "1: expected a list of preset names")]:
        candidates_file(tmp_path, text)
        assert main(["bench", "--table", str(path), "--choose-on-valid", str(tmp_path / "candidates.yaml")]) == 2
        assert message in capsys.readouterr().err


def test_every_flag_has_help():
    from memnet.cli import build_parser
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    for action in subparsers.choices["bench"]._actions:
        assert action.help, f"bench {action.option_strings} has no help"



def test_jobs_through_submitit_give_the_same_records(serial, data, tmp_path, capsys):
    pytest.importorskip("submitit", reason="the optional extra memnet[cluster]")
    out = tmp_path / "out"
    assert main(bench_args(data, out, "--submitit", "local", "--submitit-set", "timeout_min=10")) == 0
    assert "4 to run, through submitit (local)" in capsys.readouterr().out
    assert any((out / "submitit").glob("*_result.pkl"))
    mine = sorted(tuple(r[f] for f in FIGURES) for r in records(out))
    assert mine == sorted(tuple(r[f] for f in FIGURES) for r in records(serial["out"]))
    assert main(bench_args(data, out, "--submitit", "local")) == 0  # resumes: nothing submitted
    assert "4 recorded" in capsys.readouterr().out and len(records(out)) == 4


def test_submitit_missing_or_misused_is_one_line(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "submitit", None)  # as where it is not installed
    assert main(bench_args(data, tmp_path / "out", "--submitit", "slurm")) == 2
    assert "needs the submitit package (pip install 'memnet[cluster]')" in capsys.readouterr().err
    assert main(bench_args(data, tmp_path / "out", "--submitit", "slurm", "--jobs", "2")) == 2
    assert "--jobs: with --submitit the cluster runs the jobs" in capsys.readouterr().err


def test_the_commit_is_none_outside_a_checkout(tmp_path, monkeypatch):
    head, _ = bench.commit()
    assert head is None or re.fullmatch(r"[0-9a-f]{40}", head)
    monkeypatch.setattr(bench, "ROOT", tmp_path)  # an installed copy: no repository of its own
    assert bench.commit() == (None, None)


# ---------------------------------------------------------------------------- --joint


@pytest.fixture(scope="module")
def joint(data, tmp_path_factory):
    """A joint bench: one model per seed set on qa1 and qa2 together, with the data.task each trained on."""
    trained = []
    real = trainer.train

    def spy(cfg, *args, **kwargs):
        trained.append(cfg.data.task)
        return real(cfg, *args, **kwargs)

    trainer.train = spy  # run_job imports it when it runs
    try:
        folder = tmp_path_factory.mktemp("bench_joint")
        run = bench_run(data, folder / "out", "--joint", "--runs", str(folder / "runs"))
    finally:
        trainer.train = real
    return {**run, "trained": trained, "runs": folder / "runs"}


def test_a_joint_bench_trains_one_model_per_set_and_records_each_task(joint):
    assert joint["trained"] == ["1,2", "1,2"]  # two jobs, each one model on both tasks
    assert "2 jobs, each one model on 2 tasks together (joint): 0 recorded" in joint["stdout"]
    rs = records(joint["out"])
    assert sorted((r["task"], r["set"]) for r in rs) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(r["joint"] == [1, 2] and r["seed"] == 100 * r["set"] for r in rs)
    for k in (0, 1):  # the two tasks' records of a set come from one run
        assert len({r["seconds"] for r in rs if r["set"] == k}) == 1


def test_runs_keeps_each_jobs_run_folder_with_the_model_its_records_score(joint):
    for r in records(joint["out"]):
        run = joint["runs"] / "default-joint" / f"set-{r['set']}"
        assert (run / "model.pt").is_file() and "task: 1,2" in (run / "config.yaml").read_text()
        final = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        assert final["test"]["tasks"][str(r["task"])]["error"] == pytest.approx(r["test_error"], abs=1e-6)


def test_a_per_task_job_keeps_its_run_under_its_task_and_a_generated_one_says_what_trained_it():
    preset = bench.Preset("default", {}, "0" * 64)
    job = bench.Job(preset, (3,), 2, "/data", runs="/r")
    assert str(job.folder) == "/r/default/set-2/qa3"
    mixed = bench.Job(preset, (1, 2), 0, "/data", train_on.TrainOn(2000, "h", official=True), joint=True, runs="/r")
    assert str(mixed.folder) == "/r/default-official-and-generated-2000-joint/set-0"
    assert bench.Job(preset, (3,), 2, "/data").folder is None


def test_a_joint_table_sits_apart_and_a_joint_bench_resumes(joint, serial, data, tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text((serial["out"] / "records.jsonl").read_text() + (joint["out"] / "records.jsonl").read_text())
    assert main(["bench", "--table", str(path)]) == 0
    per_task, together = (part.splitlines()[0] for part in capsys.readouterr().out.split("\n\n"))
    assert "joint" not in per_task and "one model per seed set for the 2 tasks together (joint)" in together
    with pytest.raises(bench.MemnetError, match="trained on 2 sources"):
        bench.choose_on_valid(bench.read_records(path), {"default": ["default"]})
    out = tmp_path / "out"
    shutil.copytree(joint["out"], out)
    assert main(bench_args(data, out, "--joint")) == 0
    assert "2 jobs, each one model on 2 tasks together (joint): 2 recorded" in capsys.readouterr().out
    assert main(bench_args(data, out, "--joint", "--tasks", "1")) == 2
    assert "--joint: one model learns several tasks together; --tasks gives 1" in capsys.readouterr().err


# ---------------------------------------------------------------------------- --train-on generated


@pytest.fixture(scope="module")
def test_only(data, tmp_path_factory):
    """The tiny data's test files beside train and valid files no reader accepts: a generated
    bench that read them would fail."""
    folder = tmp_path_factory.mktemp("test_only")
    for task in (1, 2):
        name = babi.task_filename(task, "test")
        shutil.copyfile(data / name, folder / name)
        for split in ("train", "valid"):
            (folder / babi.task_filename(task, split)).write_text("not a bAbI file\n")
    return folder


@pytest.fixture(scope="module")
def generated(test_only, tmp_path_factory):
    """A bench trained on 100 generated questions per task: {out, stdout}."""
    return bench_run(test_only, tmp_path_factory.mktemp("bench_generated") / "out", "--train-on", "generated:100")


def test_generated_training_never_reads_the_official_train_or_valid(generated, test_only, tmp_path, capsys):
    assert main(bench_args(test_only, tmp_path / "out")) == 2  # official training reads them, and fails
    assert "_train.txt" in capsys.readouterr().err
    rs = records(generated["out"])
    assert sorted((r["task"], r["set"]) for r in rs) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for r in rs:
        assert r["train_data"] == "generated" and (r["train_questions"], r["valid_questions"]) == (100, 10)
        assert r["generator_seed"] == r["seed"] == 100 * r["set"] and r["test_questions"] == 50
        assert r["generator_hash"] == train_on.generator_hash()


def test_generated_data_is_a_function_of_task_count_and_set(generated, tmp_path):
    for r in records(generated["out"]):
        folder = tmp_path / f"{r['task']}-{r['set']}"
        folder.mkdir()
        paths = generator.write_dataset(folder, r["task"], train=100, test=0, seed=100 * r["set"], valid=10)
        assert r["generated_sha256"] == hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()
    assert len({r["generated_sha256"] for r in records(generated["out"])}) == 4


def test_a_generated_table_says_so_and_sits_apart_from_the_official_one(generated, serial, tmp_path, capsys):
    assert "trained on 100 generated questions per task" in generated["stdout"]
    path = tmp_path / "records.jsonl"
    path.write_text((serial["out"] / "records.jsonl").read_text() + (generated["out"] / "records.jsonl").read_text())
    assert main(["bench", "--table", str(path)]) == 0
    official, mine = capsys.readouterr().out.split("\n\n")
    assert official.startswith("default (") and "generated" not in official.splitlines()[0]
    assert "trained on generated stories, tested on official test (test_only" in mine.splitlines()[0]
    assert "100 generated questions per task, valid 10 generated" in mine.splitlines()[0]
    assert "unseen answer  unseen word" in mine and "Test words training never contained" in mine
    for task in (1, 2):  # each table's figures are its own records' alone
        errors = [100 * r["test_error"] for r in records(generated["out"]) if r["task"] == task]
        row = next(line.split() for line in mine.splitlines() if line.split()[:1] == [str(task)])
        assert float(row[1]) == pytest.approx(sum(errors) / 2, abs=0.005)


def test_a_joint_bench_trains_on_generated_stories_too(test_only, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(bench_args(test_only, out, "--joint", "--sets", "1", "--train-on", "generated:100")) == 0
    assert "1 jobs, each one model on 2 tasks together (joint), trained on 100 generated" in capsys.readouterr().out
    rs = records(out)
    assert [(r["task"], r["joint"], r["train_data"], r["generator_seed"]) for r in rs] == [
        (1, [1, 2], "generated", 0), (2, [1, 2], "generated", 0)]
    assert rs[0]["generated_sha256"] != rs[1]["generated_sha256"]  # each task's own stories


def test_a_generated_bench_resumes_and_another_count_is_another_job(generated, test_only, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(generated["out"], out)
    assert main(bench_args(test_only, out, "--train-on", "generated:100")) == 0
    assert "4 jobs, trained on 100 generated questions per task: 4 recorded" in capsys.readouterr().out
    assert main(bench_args(test_only, out, "--train-on", "generated:50", "--tasks", "1", "--sets", "1")) == 0
    assert "1 jobs, trained on 50 generated questions per task: 0 recorded" in capsys.readouterr().out
    assert [r["train_questions"] for r in records(out)] == [100] * 4 + [50]


# ---------------------------------------------------------------------------- --train-on official+generated


@pytest.fixture(scope="module")
def mixed(data, tmp_path_factory):
    """A bench trained on the tiny data's train file and 100 generated questions per task: {out, stdout}."""
    return bench_run(data, tmp_path_factory.mktemp("bench_mixed") / "out", "--train-on", "official+generated:100")


def test_official_and_generated_training_joins_the_train_files_and_keeps_the_official_valid(data, tmp_path):
    train = train_on.parse("official+generated:100")
    folder, source = train_on.folder(train, str(data), 1, 200, tmp_path)
    generated = tmp_path / "gen"
    (written,) = generator.write_dataset(generated, 1, train=100, test=0, seed=200)
    official = (data / babi.task_filename(1, "train")).read_bytes()
    assert (tmp_path / babi.task_filename(1, "train")).read_bytes() == official + written.read_bytes()
    for split in ("valid", "test"):
        assert (tmp_path / babi.task_filename(1, split)).read_bytes() == (data / babi.task_filename(1, split)).read_bytes()
    questions = {s: sum(len(st.questions) for st in babi.load_split(folder, 1, s)) for s in ("train", "valid")}
    assert questions == {"train": 200 + 100, "valid": 50}
    assert source == {"train_data": "official+generated", "train_questions": 100, "generator_seed": 200,
                      "generator_hash": train_on.generator_hash(),
                      "generated_sha256": hashlib.sha256(written.read_bytes()).hexdigest()}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["gen", *(babi.task_filename(1, s) for s in babi.SPLITS)])


def test_a_mixed_bench_is_its_own_column_chosen_on_the_official_valid(mixed, serial, generated, tmp_path, capsys):
    assert "4 jobs, trained on the official train file and 100 generated questions per task" in mixed["stdout"]
    rs = records(mixed["out"])
    assert {(r["train_data"], r["train_questions"], "valid_questions" in r) for r in rs} == {("official+generated", 100, False)}
    path = tmp_path / "records.jsonl"
    path.write_text("".join((b["out"] / "records.jsonl").read_text() for b in (serial, generated, mixed)))
    assert main(["bench", "--table", str(path)]) == 0
    titles = [part.splitlines()[0] for part in capsys.readouterr().out.split("\n\n")]
    assert len(titles) == 3 and "generated" not in titles[0] and "generated valid split" in titles[1]
    assert "trained on the official train file and generated stories, valid and test official" in titles[2]
    assert "100 generated questions per task, generator " in titles[2] and "generated valid" not in titles[2]


def test_mixed_training_needs_the_official_valid_file(test_only, data, tmp_path, capsys):
    folder = tmp_path / "no_valid"
    folder.mkdir()
    for split in ("train", "test"):
        shutil.copyfile(data / babi.task_filename(1, split), folder / babi.task_filename(1, split))
    assert main(["bench", "--tasks", "1", "--sets", "1", "--data", str(folder), "--out", str(tmp_path / "o"),
                 "--train-on", "official+generated:10"]) == 2
    err = capsys.readouterr().err
    assert "no valid file of task 1 (expected qa1_single-supporting-fact_valid.txt" in err and err.count("\n") == 1
    assert not (tmp_path / "o" / "records.jsonl").exists()


def test_records_of_two_generators_or_sources_never_share_a_table(tmp_path):
    gen = {"train_data": "generated", "train_questions": 1000}
    rs = [record("a", 1, 0, 0.1, 0.1), record("a", 1, 0, 0.2, 0.2, **gen, generator_hash="1" * 64),
          record("a", 1, 0, 0.3, 0.3, **gen, generator_hash="2" * 64), record("a", 1, 1, 0.4, 0.4, train_data="official")]
    groups = bench.columns(rs)
    assert [[r["valid_error"] for r in g] for g in groups] == [[0.1, 0.4], [0.2], [0.3]]
    assert "generator 111111111111" in bench.title(groups[1]) and "generator 222222222222" in bench.title(groups[2])
    with pytest.raises(bench.MemnetError, match="trained on 3 sources"):
        bench.choose_on_valid(rs, {"default": ["a"]})


def test_unseen_counts_the_test_questions_training_could_not_cover():
    vocab = Vocab.build(babi.samples(generator.generate(1, 50, seed=0)))
    story = babi.parse_lines(["1 Mary went to the kitchen.", "2 Yann went to the attic.", "3 Where is Mary?\tkitchen\t1",
                              "4 Where is Yann?\tattic\t2", "5 Where is Mary?\tkitchen\t1"])
    found = train_on.unseen(vocab, babi.samples(story))
    assert found == {"test_unseen_answer": pytest.approx(1 / 3), "test_unseen_word": pytest.approx(1 / 3),
                     "unseen_words": ["attic", "yann"]}
    rows = bench.table([record("a", 1, 0, 0.1, 0.1, **found)])
    assert rows[0].unseen_words == ["attic", "yann"] and rows[1].unseen_answer == pytest.approx(1 / 3)
    text = bench.text(bench.title([record("a", 1, 0, 0.1, 0.1)]), rows)
    assert re.search(r"\n\s+1\s.*\s33\.3\s+33\.3\n", text) and "never contained: qa1: attic yann" in text


@pytest.mark.parametrize("args, message", [
    (["--out", "o", "--train-on", "generated:0"], "--train-on: expected official, generated[:N] or official+generated[:N]"),
    (["--out", "o", "--train-on", "official+generated:x"], "found 'official+generated:x'"),
    (["--out", "o", "--train-on", "synthetic"], "found 'synthetic'"),
    (["--table", "r.jsonl", "--train-on", "generated"], "--train-on: --table prints a records file's table"),
    (["--out", "o", "--train-on", "generated", "--tasks", "3"],
     "no test file of task 3 (expected qa3_three-supporting-facts_test.txt or qa3_test.txt)"),
])
def test_bad_train_on_is_one_line(args, message, data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--data", str(data), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "o" / "records.jsonl").exists()
