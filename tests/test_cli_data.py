"""The data subcommands end to end: generate, show, stats, check."""
import json
import subprocess
import sys

import pytest

from memnet.babi import parse_lines, read_file
from memnet.cli import main
from memnet.stats import facts_before_questions, split_stats


def test_generate_is_a_pure_function_of_task_size_and_seed(tmp_path, capsys):
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        assert main(["generate", "--task", "1,16,chain", "--train", "200", "--test", "100", "--seed", seed,
                     "--out", str(tmp_path / name)]) == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    names_in_order = [f"{stem}_{split}.txt" for stem in ("qa1_single-supporting-fact", "qa16_basic-induction", "chain")
                      for split in ("train", "test")]  # the order generate writes them in
    assert names == ["chain_test.txt", "chain_train.txt", "qa16_basic-induction_test.txt",
                     "qa16_basic-induction_train.txt", "qa1_single-supporting-fact_test.txt",
                     "qa1_single-supporting-fact_train.txt"]
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes()
        assert (tmp_path / "a" / n).read_bytes() != (tmp_path / "c" / n).read_bytes()
    # one line per file written, naming it ("wrote" alone would pass a file never written)
    assert capsys.readouterr().out.splitlines() == [f"wrote {tmp_path / name / n}"
                                                    for name in "abc" for n in names_in_order]


def test_show_stats_and_check_on_generated_data(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--task", "16", "--train", "300", "--test", "300", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["show", str(out), "--task", "16", "-n", "2"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert [line for line in shown if ": story " in line] == [f"qa16_basic-induction_train.txt: story {i} of 300"
                                                              for i in (1, 2)]
    # each question with the file's answer and supporting facts (the labels alone would pass any)
    questions = [q for s in read_file(out / "qa16_basic-induction_train.txt")[:2] for q in s.questions]
    assert [line.split(maxsplit=1)[1] for line in shown if " -> " in line] == [
        f"{q.text}  ->  {q.answer}  (supporting facts {' '.join(map(str, q.support))})" for q in questions]

    assert main(["stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["tasks"]["16"]
    assert stats["train"]["questions"] == 300 and stats["train"]["stories"] == 300
    assert stats["train"]["vocab_size"] == 17 and stats["test"]["questions"] == 300
    assert stats["overlap"] < 300  # a few short stories may repeat by chance, never all

    assert main(["check", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()  # every line, exactly: "10 disagree" must not pass
    assert lines == [f"ok   qa16_basic-induction_{split}.txt: 300 questions, 0 disagree with the solver"
                     for split in ("train", "test")]


def test_compare_with_the_official_files(tmp_path, babi_dir, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--task", "16", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["stats", str(out), "--compare", str(babi_dir / "en"), "--json"]) == 0
    compare = json.loads(capsys.readouterr().out)["compare"]["16"]
    assert compare["vocab_subset"] and compare["vocab_coverage"] == 1.0 and compare["same_answers"]
    assert abs(compare["facts_per_story_diff"]) < 0.10
    assert compare["facts_before_question"] == [9.0, 9.0] and compare["facts_before_question_diff"] == 0.0


def test_facts_before_questions_counts_the_facts_told_so_far():
    (story,) = parse_lines(["1 Mary went to the kitchen.", "2 Where is Mary? \tkitchen\t1",
                            "3 John went to the garden.", "4 Mary went to the office.",
                            "5 Where is Mary? \toffice\t4", "6 Where is John? \tgarden\t3"])
    assert facts_before_questions([story]) == [1, 3, 3]  # facts only: earlier questions are not memory
    assert split_stats([story]).before_question_mean == pytest.approx(7 / 3)


def test_check_flags_the_official_size_questions_citing_other_facts(babi_dir, capsys):
    assert main(["check", str(babi_dir / "en"), "--task", "18"]) == 1
    # each file's line exactly ("60 disagree" alone would pass 160), then its first 3 disagreements
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if not line.startswith("       ")] == [
        "FAIL qa18_size-reasoning_train.txt: 1000 questions, 60 disagree with the solver",
        "FAIL qa18_size-reasoning_test.txt: 1000 questions, 39 disagree with the solver"]
    assert len(lines) == 2 + 2 * 3


def test_check_agrees_with_every_official_induction_question(babi_dir, capsys):
    # the 150 whose kind-mates differ in colour too: they answer with the one whose kind was told last
    assert main(["check", str(babi_dir / "en"), "--task", "16"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"ok   qa16_basic-induction_{split}.txt: 1000 questions, 0 disagree with the solver" for split in ("train", "test")]


def test_bad_input_is_one_clear_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "qa1_train.txt").write_text("1 Mary went home.\n2 Where is Mary? \thome\t9\n")
    assert main(["show", str(tmp_path), "--task", "1"]) == 2
    err = capsys.readouterr().err
    assert "qa1_train.txt:2: expected supporting ids among the story's earlier lines 1..1, found id 9" in err
    assert main(["stats", str(tmp_path / "missing")]) == 2
    assert "missing: no such data folder, nor an official set's name (en, en-10k" in capsys.readouterr().err
    assert main(["generate", "--task", "21", "--out", str(tmp_path / "x")]) == 2
    assert "between 1 and 20" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_check_reports_a_question_outside_the_task_language(tmp_path, capsys):
    (tmp_path / "qa1_train.txt").write_text("1 Mary went to the kitchen.\n2 Who is Mary? \tkitchen\t1\n")
    assert main(["check", str(tmp_path)]) == 1
    # the whole report: "1 disagree" alone would pass 11, and the file's answer and the solver's in their places
    assert capsys.readouterr().out.splitlines() == [
        "FAIL qa1_train.txt: 1 questions, 1 disagree with the solver",
        "       story 1, line 2 'Who is Mary?': file says kitchen (1), solver says "
        "<unreadable: unexpected question 'Who is Mary?'> ()"]


def test_the_data_commands_do_not_load_torch(tmp_path):
    # `memnet --help`, generate, show, stats, check and data download start in a fraction of a second: torch
    # and Numba (seconds to import) load only for the commands that run a model
    script = f"""
import sys
from memnet.cli import main
out = {str(tmp_path / "gen")!r}
assert main(["generate", "--task", "1", "--train", "20", "--test", "20", "--out", out]) == 0
for argv in (["show", out, "--task", "1", "-n", "1"], ["stats", out], ["check", out]):
    assert main(argv) == 0
# data download, through the fetching code (tqdm, urllib) to a one-line failure
assert main(["data", "download", "--dir", {str(tmp_path / "home")!r}, "--url", "file:///nonexistent/x.tar.gz"]) == 2
try:
    main(["--help"])
except SystemExit:
    pass
print(sorted({{m.split(".")[0] for m in sys.modules}} & {{"torch", "numba"}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
