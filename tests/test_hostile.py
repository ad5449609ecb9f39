"""Hostile input: every failure a user can cause is one line, a non-zero status and nothing lost.

Families, each case asserting the exit status, the message and the files left behind:
  writing    an output that cannot be written (a folder or /dev/full where the file goes, a
             file where its folder goes, a full disk, a read-only folder): the previous file
             stays as it was, no temporary file stays behind
  not files  a task file, story file or checkpoint that is a folder, a FIFO, a symlink loop,
             /dev/zero, a broken link, not UTF-8, empty
  options    counts, knobs and limits outside their range, with the range in the message;
             generate writes nothing at all when a knob is bad
  injection  terminal escapes, HTML, spreadsheet formulas and mathtext in story text
  signals    Ctrl-C during generate, a full or closed standard output (subprocesses)
  fuzzing    random bytes for the bAbI reader, random dotted overrides for the config: only
             MemnetError, never a traceback (hypothesis)

Commands run in-process through memnet.cli.main; only the signal cases start a process. The
model commands use conftest's tiny trained model (inspect_run). Training's own value checks
and faults belong to the trainer's tests.
"""
import contextlib
import csv
import io
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memnet import babi, config
from memnet.cli import main

ROOT = Path(__file__).resolve().parents[1]
QA1 = "qa1_single-supporting-fact_train.txt"
QA16_TEST = "qa16_basic-induction_test.txt"
STORY = "1 Brian is a frog.\n2 Lily is gray.\n3 Brian is yellow.\n4 Julius is green.\n5 Greg is a frog.\n6 What color is Greg?\n"


DEADLINE = 60  # seconds a command may take before it counts as blocked


@pytest.fixture(autouse=True)
def deadline():
    """A case that blocks (a FIFO read, a story that never ends) fails after 60 s instead of hanging the suite
    (each command of `run` starts its own 60 s, so a property test's many commands are not one budget)."""
    def expire(signum, frame):
        raise TimeoutError(f"the command did not finish within {DEADLINE} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(DEADLINE)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def run(capsys, *argv):
    signal.alarm(DEADLINE)
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(code, err, command, message, status=2):
    assert code == status, err
    assert err.startswith(f"memnet {command}: error: ") and err.count("\n") == 1, err
    assert message in err, err


def files(folder: Path) -> dict[str, bytes]:
    """Every regular file under `folder` (temporary files included) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def model(inspect_run):
    return ["--checkpoint", inspect_run["checkpoint"], "--data", inspect_run["data"]]


# ---------------------------------------------------------------------------- writing

# (name, argv before the output path, the flag that takes it, the file it writes in that place)
WRITERS = [
    ("generate", ["generate", "--task", "1", "--train", "40", "--test", "0"], "--out", QA1),
    *[(f"inspect {fmt}", ["inspect", "--format", fmt], "--out", None) for fmt in ("text", "markdown", "json", "csv", "png")],
    ("report", ["report", "--limit", "3"], "--out", None),
]


def _writer_argv(writer, model, target: Path) -> list:
    name, argv, flag, _ = writer
    return [*argv, *(model if name != "generate" else []), flag, target]


@contextlib.contextmanager
def file_size_limit(size: int):
    """Writes past `size` bytes fail with EFBIG, as on a full disk (SIGXFSZ ignored, as a
    process that handles the error must)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


@pytest.mark.parametrize("writer", WRITERS, ids=[w[0] for w in WRITERS])
def test_a_folder_where_the_output_file_goes(capsys, model, tmp_path, writer):
    # generate writes into a folder: the folder is given, and a folder stands at its file's name
    target = tmp_path / "out.x"
    (target / (writer[3] or "")).mkdir(parents=True)
    code, out, err = run(capsys, *_writer_argv(writer, model, target))
    assert_one_line(code, err, writer[1][0], "expected a file to write (or no file yet), found a folder")
    assert files(tmp_path) == {}


@pytest.mark.parametrize("writer", WRITERS, ids=[w[0] for w in WRITERS])
def test_a_file_where_the_output_folder_goes(capsys, model, tmp_path, writer):
    (tmp_path / "file").write_text("keep me\n")
    target = tmp_path / "file" / "sub" / "out.x"
    code, out, err = run(capsys, *_writer_argv(writer, model, target))
    assert_one_line(code, err, writer[1][0], f"{tmp_path / 'file'}: expected a folder to write")
    assert "found a regular file" in err
    assert files(tmp_path) == {"file": b"keep me\n"}


@pytest.fixture
def dev_full(tmp_path) -> Path:
    """/dev/full, or for root (who could rename a file over /dev/full should memnet regress) a
    device node of its own, the same device (1, 7), in the test's folder."""
    if os.geteuid() != 0:
        return Path("/dev/full")
    path = tmp_path / "full"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    return path


@pytest.mark.parametrize("writer", WRITERS, ids=[w[0] for w in WRITERS])
def test_dev_full_as_the_output(capsys, model, dev_full, writer):
    code, out, err = run(capsys, *_writer_argv(writer, model, dev_full))
    if writer[0] == "generate":
        assert_one_line(code, err, "generate", f"{dev_full}: expected a folder to write")
    else:
        assert_one_line(code, err, writer[1][0], f"{dev_full}: expected a file to write (or no file yet), found a character device")
    assert dev_full.is_char_device()  # not renamed over


@pytest.mark.parametrize("writer", WRITERS, ids=[w[0] for w in WRITERS])
def test_a_full_disk_keeps_the_previous_file(capsys, model, tmp_path, writer):
    name = writer[3] or "out.x"
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / name).write_bytes(b"previous\n")
    target = folder if writer[0] == "generate" else folder / name
    argv = _writer_argv(writer, model, target)
    with file_size_limit(64):
        code, out, err = run(capsys, *argv)
    assert_one_line(code, err, writer[1][0], f"{folder / name}: cannot write (File too large)")
    assert files(folder) == {name: b"previous\n"}  # untouched, and no temporary file left


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("writer", WRITERS, ids=[w[0] for w in WRITERS])
def test_a_read_only_folder(capsys, model, tmp_path, writer):
    folder = tmp_path / "ro"
    folder.mkdir()
    name = writer[3] or "out.x"
    (folder / name).write_bytes(b"previous\n")
    folder.chmod(0o555)
    try:
        code, out, err = run(capsys, *_writer_argv(writer, model, folder if writer[0] == "generate" else folder / name))
    finally:
        folder.chmod(0o755)
    assert_one_line(code, err, writer[1][0], "cannot write (Permission denied)")
    assert files(folder) == {name: b"previous\n"}


def test_ctrl_c_just_after_the_temporary_file_is_made_leaves_none(tmp_path, monkeypatch):
    # the trainer writes last.pt every evaluation: a Ctrl-C lands anywhere, here right after the
    # temporary file exists and before its descriptor is returned (it once stayed behind)
    from memnet import files as memnet_files

    (tmp_path / "model.pt").write_bytes(b"previous\n")
    real = os.open

    def made_then_interrupted(path, flags, mode=0o777, **kwargs):
        os.close(real(path, flags, mode, **kwargs))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "open", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        memnet_files.atomic_write(tmp_path / "model.pt", b"new\n")
    monkeypatch.undo()
    assert files(tmp_path) == {"model.pt": b"previous\n"}


def test_generate_replaces_a_file_only_when_complete(capsys, tmp_path):
    assert run(capsys, "generate", "--task", "1", "--train", "40", "--test", "0", "--out", tmp_path)[0] == 0
    first = files(tmp_path)
    assert list(first) == [QA1]
    assert run(capsys, "generate", "--task", "1", "--train", "40", "--test", "0", "--out", tmp_path)[0] == 0
    assert files(tmp_path) == first  # the same bytes, no temporary file beside them


# ---------------------------------------------------------------------------- inputs that are not files


def _make(path: Path, what: str) -> str:
    """Put `what` at `path`; returns the words the error should use for it."""
    if what == "folder":
        path.mkdir()
        return "found a folder"
    if what == "FIFO":
        os.mkfifo(path)  # reading it would block for ever
        return "found a FIFO"
    if what == "symlink loop":
        path.symlink_to(path.name)
        return "found a symlink loop"
    if what == "/dev/zero":
        path.symlink_to("/dev/zero")  # reading it would never end
        return "found a character device"
    if what == "broken link":
        path.symlink_to(path.parent / "nowhere")
        return "found a broken symbolic link"
    if what == "not UTF-8":
        path.write_bytes(b"1 Mary went to the kitchen.\n2 Where is Mary\xff?\tkitchen\t1\n")
        return "2: expected UTF-8 text, found byte 0xff"
    raise ValueError(what)


NOT_FILES = ["folder", "FIFO", "symlink loop", "/dev/zero", "broken link", "not UTF-8"]


@pytest.mark.parametrize("what", NOT_FILES)
def test_check_fails_a_task_file_that_is_not_a_file(capsys, tmp_path, what):
    message = _make(tmp_path / QA1, what)
    code, out, err = run(capsys, "check", tmp_path)
    assert code == 1 and err == ""
    assert out.startswith(f"FAIL {tmp_path / QA1}") and message in out and out.count("\n") == 1, out


@pytest.mark.parametrize("command", ["stats", "show"])
@pytest.mark.parametrize("what", NOT_FILES)
def test_stats_and_show_refuse_a_task_file_that_is_not_a_file(capsys, tmp_path, what, command):
    message = _make(tmp_path / QA1, what)
    code, out, err = run(capsys, command, tmp_path, "--task", "1")
    assert_one_line(code, err, command, f"{tmp_path / QA1}")
    assert message in err and out == ""


@pytest.mark.parametrize("text, message", [
    ("", "expected at least one question, found none"),
    ("\n\n", "expected at least one question, found none"),
    ("1 Mary went to the kitchen.\n2 John went to the garden.\n", "expected at least one question, found none"),
    ("1 Where is Mary?\tkitchen\t\n", "no fact before the question tells where Mary is"),
    ("1 Mary went to the kitchen.\n2 Where is John?\tkitchen\t1\n", "no fact before the question tells where John is"),
    ("1 Where is the milk?\tkitchen\t\n", "unreadable"),
    ("1 Mary went to the kitchen.\n3 Where is Mary?\tkitchen\t1\n", ":2: expected id 2"),
    ("1 Mary went to the kitchen.\n2 Where is Mary?\tkitchen\t7\n", ":2: expected supporting ids among"),
    ("\x00\x01\x02 binary\n", ":1: expected a line 'ID text'"),
])
def test_check_fails_a_file_without_checkable_questions(capsys, tmp_path, text, message):
    (tmp_path / QA1).write_text(text)
    code, out, err = run(capsys, "check", tmp_path)
    assert code == 1 and err == "" and out.startswith("FAIL ") and message in out, out


def test_check_on_stories_that_begin_with_a_question_in_every_task(capsys, tmp_path):
    for task in list(range(1, 21)) + ["chain"]:
        story = babi.Story([babi.Line(1, "Where is Mary?", "kitchen", ())])
        babi.write_file(tmp_path / babi.task_filename(task, "train"), [story])
    code, out, err = run(capsys, "check", tmp_path)
    assert code == 1 and err == "" and out.count("FAIL") == 21, out


@pytest.mark.parametrize("command", ["inspect", "ask"])
@pytest.mark.parametrize("what", [*NOT_FILES, "empty"])
def test_a_story_file_that_is_not_a_story(capsys, inspect_run, tmp_path, command, what):
    path = tmp_path / "story.txt"
    if what == "empty":
        path.write_text("\n")
        message = "empty story file"
    else:
        message = _make(path, what)
    code, out, err = run(capsys, command, "--checkpoint", inspect_run["checkpoint"], "--story", path)
    assert_one_line(code, err, command, str(path))
    assert message in err and out == ""


BAD_CHECKPOINTS = [*NOT_FILES[:5], "missing", "empty", "text", "zip of junk"]


def _checkpoint(path: Path, what: str) -> str:
    if what == "missing":
        return "found no such file"
    if what == "empty":
        path.write_bytes(b"")
    elif what == "text":
        path.write_text("state_dict: none\n")
    elif what == "zip of junk":
        import zipfile
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("archive/data.pkl", b"junk")
    else:
        return _make(path, what)
    return "not a readable memnet checkpoint"


@pytest.mark.parametrize("command", ["inspect", "report", "ask"])
@pytest.mark.parametrize("what", BAD_CHECKPOINTS)
def test_a_checkpoint_that_is_not_one(capsys, inspect_run, tmp_path, command, what):
    path = tmp_path / "model.pt"
    message = _checkpoint(path, what)
    extra = {"inspect": [], "report": ["--out", tmp_path / "r.html"], "ask": ["--story", tmp_path / "s.txt"]}[command]
    (tmp_path / "s.txt").write_text(STORY)
    code, out, err = run(capsys, command, "--checkpoint", path, "--data", inspect_run["data"], *extra) if command != "ask" \
        else run(capsys, command, "--checkpoint", path, *extra)
    assert_one_line(code, err, command, str(path))
    assert message in err and out == ""
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("what", ["missing", "empty", "text", "folder"])
def test_eval_of_a_checkpoint_that_is_not_one(capsys, inspect_run, tmp_path, what):
    path = tmp_path / "model.pt"
    _checkpoint(path, what)
    code, out, err = run(capsys, "eval", "--checkpoint", path, "--data", inspect_run["data"])
    assert_one_line(code, err, "eval", str(path))


@pytest.mark.parametrize("command", ["inspect", "report"])
@pytest.mark.parametrize("what", ["missing", "a file"])
def test_a_data_folder_that_is_not_one(capsys, inspect_run, tmp_path, command, what):
    data = tmp_path / "data"
    if what == "a file":
        data.write_text("not a folder\n")
    extra = ["--out", tmp_path / "r.html"] if command == "report" else []
    code, out, err = run(capsys, command, "--checkpoint", inspect_run["checkpoint"], "--data", data, *extra)
    assert_one_line(code, err, command, f"{data}: no such data folder")


# ---------------------------------------------------------------------------- options

GENERATE_ERRORS = [
    (["--train", "-1"], "argument --train: expected a whole number >= 0, found -1"),
    (["--valid", "-5"], "argument --valid: expected a whole number >= 0, found -5"),
    (["--test", "-1"], "argument --test: expected a whole number >= 0, found -1"),
    (["--train", "ten"], "argument --train: expected a whole number >= 0, found 'ten'"),
    (["--seed", "abc"], "argument --seed: expected a whole number >= 0, found 'abc'"),
    (["--seed", "-1"], "argument --seed: expected a whole number >= 0, found -1"),
    (["--train", "0", "--test", "0"], "expected at least one split with questions"),
    (["--questions", "0"], "argument --questions: expected a whole number from 1 to 1000, found 0"),
    (["--questions", "-3"], "argument --questions: expected a whole number from 1 to 1000, found -3"),
    (["--questions", "1001"], "argument --questions: expected a whole number from 1 to 1000, found 1001"),
    (["--length", "0"], "argument --length: expected a whole number from 1 to 1000, found 0"),
    (["--actors", "0"], "argument --actors: expected a whole number from 1 to 1000, found 0"),
    (["--distractors", "-1"], "argument --distractors: expected a whole number from 0 to 1000, found -1"),
    (["--hops", "0"], "argument --hops: expected a whole number from 1 to 15, found 0"),
    (["--task", "chain", "--hops", "16"], "argument --hops: expected a whole number from 1 to 15, found 16"),
    (["--task", "21"], "task: expected numbers between 1 and 20; found '21'"),
    (["--task", "0"], "task: expected numbers between 1 and 20; found '0'"),
    (["--task", "qa"], "task: expected a number 1-20"),
    (["--task", "1", "--actors", "9"], "task 1: actors: expected 1 to 8 for this task, found 9"),
    (["--task", "5", "--actors", "9"], "task 5: actors: expected 2 to 4 for this task, found 9"),
    (["--task", "5", "--actors", "1"], "task 5: actors: expected 2 to 4 for this task, found 1"),
    (["--task", "12", "--actors", "1"], "task 12: actors: expected 2 to 4 for this task, found 1"),
    (["--task", "14", "--actors", "5"], "task 14: actors: expected 1 to 4 for this task, found 5"),
    (["--task", "15", "--actors", "5"], "task 15: actors: expected 1 to 4 for this task, found 5"),
    (["--task", "16", "--actors", "1"], "task 16: actors: expected 2 to 9 for this task, found 1"),
    (["--task", "16", "--actors", "10"], "task 16: actors: expected 2 to 9 for this task, found 10"),
    (["--task", "20", "--actors", "5"], "task 20: actors: expected 1 to 4 for this task, found 5"),
    (["--task", "4", "--length", "1"], "task 4: length: expected 2 to 5 for this task, found 1"),
    (["--task", "17", "--length", "6"], "task 17: length: expected 2 to 5 for this task, found 6"),
    (["--task", "18", "--length", "8"], "task 18: length: expected 1 to 7 for this task, found 8"),
    (["--task", "18", "--questions", "101"], "task 18: questions: expected 1 to 100 for this task, found 101"),
    (["--task", "19", "--length", "4", "--distractors", "2"], "task 19: distractors: expected 0 to 1 for this task, found 2"),
    (["--task", "chain", "--questions", "20", "--hops", "15"], "task chain: questions/hops: too many for one story"),
    (["--task", "1,5", "--actors", "9"], "task 1: actors: expected 1 to 8"),  # checked before any task is written
    (["--task", "2,5", "--actors", "5"], "task 5: actors: expected 2 to 4"),
    # a knob the task does not take is refused, not ignored (every task and knob: test_generators)
    (["--task", "1", "--distractors", "3"], "--distractors: task 1 (single supporting fact) takes no --distractors; "
                                            "its knobs are --questions, --length, --actors"),
    (["--task", "16", "--questions", "2"], "--questions: task 16 (basic induction) takes no --questions; its knob is --actors"),
    (["--task", "4", "--actors", "3"], "--actors: task 4 (two arg relations) takes no --actors; its knobs are --questions, "
                                       "--length"),
    (["--task", "chain", "--actors", "3"], "--actors: task chain takes no --actors; its knobs are --questions, --length, "
                                           "--distractors, --hops"),
    (["--task", "1,19", "--distractors", "1"], "--distractors: task 1 (single supporting fact) takes no --distractors"),
    (["--task", "1-20", "--distractors", "3"], "--distractors: tasks 1-18 and 20 take no --distractors, only 19 and chain "
                                               "do; drop --distractors, or give it in a run of its own with --task 19,chain"),
    (["--task", "15-20", "--length", "3"], "--length: tasks 15, 16 and 20 take no --length, only 1-14, 17-19 and chain do; "
                                           "drop --length, or give it in a run of its own with --task 1-14,17-19,chain"),
    (["--task", "1-3", "--hops", "3"], "--hops: tasks 1-3 take no --hops, only chain does; drop --hops, or give it in a "
                                       "run of its own with --task chain"),
    (["--task", "chain", "--length", "12", "--distractors", "2"], "task chain: length/distractors: either one sets the "
                                                                  "distractors"),  # distractors would override length
]


@pytest.mark.parametrize("args, message", GENERATE_ERRORS, ids=[" ".join(a) for a, _ in GENERATE_ERRORS])
def test_generate_refuses_values_out_of_range_and_writes_nothing(capsys, tmp_path, args, message):
    code, out, err = run(capsys, "generate", "--train", "20", "--test", "20", "--out", tmp_path / "out", *args)
    assert_one_line(code, err, "generate", message)
    assert out == "" and not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("small")
    assert main(["generate", "--task", "1,16", "--train", "30", "--test", "30", "--out", str(folder)]) == 0
    return folder


@pytest.mark.parametrize("args, message", [
    (["show", "{data}", "--task", "1", "-n", "-1"], "argument -n: expected a whole number >= 1, found -1"),
    (["show", "{data}", "--task", "1", "-n", "0"], "argument -n: expected a whole number >= 1, found 0"),
    (["show", "{data}", "--task", "1", "--split", "valid"], "expected a valid file for task 1, found none"),
    (["show", "{data}", "--task", "21"], "task: expected numbers between 1 and 20"),
    (["check", "{data}", "--show", "-1"], "argument --show: expected a whole number >= 0, found -1"),
    (["check", "{data}/" + QA1], "expected a folder of bAbI files, found a regular file"),
    (["check", "{data}/missing"], "missing: no such data folder, nor an official set's name"),
    (["stats", "{empty}"], "expected bAbI task files"),
    (["stats", "{data}", "--compare", "{data}/missing"], "missing: no such data folder, nor an official set's name"),
    (["stats", "{data}", "--compare", "{data}/" + QA1], "expected a folder of bAbI files, found a regular file"),
])
def test_data_command_limits(capsys, small_data, tmp_path, args, message):
    argv = [a.format(data=small_data, empty=tmp_path) for a in args]
    code, out, err = run(capsys, *argv)
    assert_one_line(code, err, args[0], message)


@pytest.fixture(scope="module")
def empty_split(inspect_run, tmp_path_factory):
    """The model's data folder with an empty test file."""
    folder = tmp_path_factory.mktemp("empty_split")
    for path in Path(inspect_run["data"]).iterdir():
        (folder / path.name).write_bytes(b"" if path.name == QA16_TEST else path.read_bytes())
    return folder


@pytest.mark.parametrize("args, message", [
    (["inspect", "--all", "--limit", "0"], "argument --limit: expected a whole number >= 1, found 0"),
    (["inspect", "--all", "--limit", "-2"], "argument --limit: expected a whole number >= 1, found -2"),
    (["inspect", "--index", "-1"], "argument --index: expected a whole number >= 0, found -1"),
    (["inspect", "--index", "60"], "--index 60 is out of range: the test split has 60 questions (0..59)"),
    (["inspect", "--format", "png"], "--format png needs --out FILE"),
    (["inspect", "--format", "png", "--all", "--out", "x.png"], "--format png draws one question; drop --all"),
    (["inspect", "--format", "html"], "argument --format: invalid choice"),
    (["inspect", "--task", "1-3"], "choose one with --task"),
    # a flag the mode chosen would not read is refused, not ignored
    (["inspect", "--all", "--index", "3"], "--index: picks one question, --all walks the split; drop one of the two"),
    (["inspect", "--limit", "2"], "--limit goes with --all (walk the split's questions): add --all, or drop --limit"),
    (["inspect", "--wrong-only"], "--wrong-only goes with --all (walk the split's questions): add --all, or drop "
                                  "--wrong-only"),
    (["inspect", "--min-probability", "0.9"], "--min-probability: declines the answer to a --story question; a data "
                                              "set's questions are shown as the model answers them (drop it, or give "
                                              "--story)"),
    (["inspect", "--format", "json", "--color", "always"], "--color: colours the text format only, and --format json "
                                                          "has no colour; drop --color"),
    (["inspect", "--format", "csv", "--color", "never", "--out", "t.csv"], "--color: colours the text format only, and "
                                                                          "--format csv has no colour; drop --color"),
    (["inspect", "--format", "png", "--color", "always", "--out", "t.png"], "--format png has no colour; drop --color"),
    (["report", "--limit", "0", "--out", "r.html"], "argument --limit: expected a whole number >= 1, found 0"),
    (["report", "--limit", "-1", "--out", "r.html"], "argument --limit: expected a whole number >= 1, found -1"),
])
def test_model_command_limits(capsys, model, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *args[:1], *model, *args[1:])
    assert_one_line(code, err, args[0], message)
    assert out == "" and files(tmp_path) == {}


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_ask_refuses_color_with_a_format_without_colour(capsys, inspect_run, hostile_story, monkeypatch, fmt):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Brian is a frog.\nWhat color is Brian?\n"))
    for story in ([], ["--story", hostile_story]):
        code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], *story, "--format", fmt,
                             "--color", "always")
        assert_one_line(code, err, "ask", f"--color: colours the text format only, and --format {fmt} has no colour")
        assert out == ""


@pytest.mark.parametrize("color", [None, "auto", "always", "never"])
def test_inspect_out_is_what_standard_output_gets(capsys, model, tmp_path, color):
    """--out is standard output in a file: --color always colours it as it colours a redirected stdout
    (not ignored), auto and never do not (a file is no terminal)."""
    flag = ["--color", color] if color else []
    code, out, _ = run(capsys, "inspect", *model, *flag)
    assert code == 0
    code, _, err = run(capsys, "inspect", *model, *flag, "--out", tmp_path / "t.txt")
    written = (tmp_path / "t.txt").read_text()
    assert code == 0 and err == f"wrote {tmp_path / 't.txt'}\n"
    assert written == out  # captured stdout is no terminal either: auto gives no colour there too
    assert ("\033[" in written) == (color == "always")


@pytest.mark.parametrize("args", [["inspect", "--all"], ["inspect"], ["report", "--out", "r.html"]])
def test_an_empty_split(capsys, inspect_run, empty_split, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *args[:1], "--checkpoint", inspect_run["checkpoint"], "--data", empty_split, *args[1:])
    assert_one_line(code, err, args[0], f"{empty_split / QA16_TEST}: expected the test questions of task 16, found an empty "
                                        "file; --split valid reads another split")
    assert files(tmp_path) == {}


# ---------------------------------------------------------------------------- injection

HOSTILE = ("1 Brian is a frog.\x1b[2J\x1b]0;owned\x07\n"
           "2 Lily is <script>alert(1)</script> gray.\n"
           "3 =HYPERLINK(\"http://x\",\"click\") Brian is yellow.\n"
           "4 Julius is $\\frac{a}{b}$ green and costs $5.\n"
           "5 Greg is a frog " + "and a very long frog " * 40 + ".\n"
           "6 @SUM(A1) Lily is a swan.\n"
           "7 -2+3 Julius is a \u202eswan.\n"
           "8 What color is Greg?\tyellow\t5 1 3\n")


@pytest.fixture
def hostile_story(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text(HOSTILE)
    return path


@pytest.mark.parametrize("color", ["never", "always"])
def test_text_output_shows_terminal_escapes_never_sends_them(capsys, inspect_run, hostile_story, color):
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", hostile_story, "--color", color)
    assert code == 0, err
    assert "\x1b[2J" not in out and "\x1b]0" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b[2J\\x1b]0;owned\\x07" in out and "\\u202e" in out


def test_markdown_escapes_html(capsys, inspect_run, hostile_story):
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", hostile_story, "--format", "markdown")
    assert code == 0 and "<script>" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "\x1b" not in out


def test_csv_cells_never_start_a_formula(capsys, inspect_run, hostile_story, tmp_path):
    out_file = tmp_path / "t.csv"
    code, _, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", hostile_story,
                       "--format", "csv", "--out", out_file)
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out_file.read_text())))
    cells = [cell for row in rows for cell in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    sentences = [row[2] for row in rows[1:]]
    assert "'=HYPERLINK(\"http://x\",\"click\") Brian is yellow." in sentences
    assert "'@SUM(A1) Lily is a swan." in sentences and "'-2+3 Julius is a \u202eswan." in sentences


def test_json_keeps_the_text_as_data(capsys, inspect_run, hostile_story):
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", hostile_story, "--format", "json")
    assert code == 0 and "\x1b" not in out  # json escapes control characters itself
    texts = [m["text"] for m in json.loads(out)["memories"]]
    assert texts[0] == "Brian is a frog.\x1b[2J\x1b]0;owned\x07"


def test_png_draws_dollars_and_long_sentences_literally(capsys, inspect_run, hostile_story, tmp_path):
    out_file = tmp_path / "h.png"
    code, _, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", hostile_story,
                       "--format", "png", "--out", out_file)
    assert code == 0, err
    assert out_file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_of_an_unbalanced_dollar(capsys, inspect_run, tmp_path):
    story = tmp_path / "s.txt"
    # the question stays one the model can be asked (`ask` declines others); the story carries the markup
    story.write_text(STORY.replace("Lily is gray.", "Lily is $gray.").replace("Julius is green.", "Julius is $x^{ green."))
    code, _, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", story,
                       "--format", "png", "--out", tmp_path / "u.png")
    assert code == 0 and (tmp_path / "u.png").read_bytes()[:4] == b"\x89PNG", err


def test_report_escapes_html(capsys, inspect_run, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / QA16_TEST).write_text(HOSTILE)
    code, _, err = run(capsys, "report", "--checkpoint", inspect_run["checkpoint"], "--data", data, "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert code == 0 and "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("command", [["show", "--task", "16"], ["check", "--task", "16"], ["stats"]])
def test_data_commands_show_escapes(capsys, tmp_path, command):
    (tmp_path / QA16_TEST.replace("test", "train")).write_text(HOSTILE.replace("\tyellow\t", "\tyel\x1b[31mlow\t"))
    code, out, err = run(capsys, command[0], tmp_path, *command[1:])
    # show and stats succeed; check fails the file, whose answer is not the solver's 'yellow'
    assert code == {"show": 0, "check": 1, "stats": 0}[command[0]], out
    assert err == "" and "\x1b" not in out and "\\x1b" in out, out


def test_ask_shows_escapes(capsys, inspect_run, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Brian is a frog.\x1b[2J\nGreg is a frog.\nWhat color is Greg?\n"))
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--color", "never")
    assert code == 0 and "\x1b" not in out + err and "\\x1b[2J" in out


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])  # the second: Python's stdin under a C locale
def test_ask_refuses_input_that_is_not_utf8(capsys, inspect_run, monkeypatch, errors):
    stdin = io.TextIOWrapper(io.BytesIO(b"Brian is a frog.\nGreg is \xff a frog.\nWhat color is Greg?\n"),
                             encoding="utf-8", errors=errors)
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"])
    assert_one_line(code, err, "ask", "standard input: expected UTF-8 text, found byte 0xff")


# ---------------------------------------------------------------------------- signals and standard output


def _memnet(*argv, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Ctrl-C as a terminal sends it: a shell's background job (`scripts/mutation ... &`) runs with SIGINT
    # ignored, which the child would inherit, and Python then never turns the SIGINT into KeyboardInterrupt
    return subprocess.Popen([sys.executable, "-m", "memnet", *map(str, argv)], env=env, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)


def test_ctrl_c_during_generate_leaves_the_previous_file_and_no_partial_one(tmp_path):
    (tmp_path / QA1).write_text("previous\n")
    proc = _memnet("generate", "--task", "1", "--train", "10000000", "--test", "0", "--out", tmp_path, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")] and time.monotonic() < deadline:
        time.sleep(0.05)  # until the temporary file exists: the interrupt comes mid-write
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and err == "interrupted\n"
    assert files(tmp_path) == {QA1: b"previous\n"}


def test_a_full_standard_output_is_one_line(tmp_path):
    with open("/dev/full", "w") as full:
        proc = _memnet("generate", "--task", "1", "--train", "20", "--test", "0", "--out", tmp_path, stdout=full)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err == "memnet generate: error: cannot write to standard output (No space left on device)\n"
    assert list(files(tmp_path)) == [QA1]  # the data itself was written


def test_a_closed_pipe_is_a_normal_end(tmp_path):
    assert main(["generate", "--task", "1", "--train", "3000", "--test", "0", "--out", str(tmp_path)]) == 0
    proc = _memnet("show", tmp_path, "--task", "1", "-n", "1000", stdout=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 0 and err == ""


# ---------------------------------------------------------------------------- fuzzing

LINE_PARTS = st.sampled_from(["1 ", "2 ", "3 ", "0 ", "-1 ", "10 ", "Mary went to the kitchen.", "Where is Mary?",
                              "\t", "kitchen", " 1", " 2", "x", "?", "\r", "\x00", "é", " "])
LINES = st.lists(st.lists(LINE_PARTS, max_size=8).map("".join), max_size=12).map("\n".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=300), LINES.map(lambda s: s.encode("utf-8"))))
def test_the_babi_reader_raises_only_format_errors(tmp_path, data):
    path = tmp_path / "qa1_train.txt"
    path.write_bytes(data)
    try:
        stories = babi.read_file(path)
    except babi.BabiFormatError as e:
        assert str(e).startswith(str(path)) and "\n" not in str(e)
        return
    from memnet import solver
    solver.check(1, stories)  # any parsed story can be checked without an exception


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(LINE_PARTS, min_size=1, max_size=10).map("".join).map(lambda s: s.encode("utf-8")))
def test_check_never_tracebacks_on_a_random_file(capsys, tmp_path, data):
    (tmp_path / QA1).write_bytes(data)
    code, out, err = run(capsys, "check", tmp_path)
    assert code in (0, 1) and err == ""


KEYS = st.sampled_from(["model.hops", "model.dim", "train.lr", "train.epochs", "data.task", "model", "model.", ".hops",
                        "model.hops.x", "nope.key", "model.masking", "model.stopping", "train", "", "=", "a.b.c"])
VALUES = st.one_of(st.text(max_size=12), st.sampled_from(["1", "-1", "0", "1e9", "nan", "inf", "true", "no", "[1, 2]",
                                                          "{a: 1}", "!!python/object:os.system", "'x'", "~", "hard"]))


@settings(max_examples=300, deadline=None)
@given(overrides=st.lists(st.one_of(st.tuples(KEYS, VALUES).map("=".join), st.text(max_size=20)), max_size=4))
def test_overrides_raise_only_config_errors(overrides):
    try:
        config.apply_overrides(config.Config(), overrides)
    except config.ConfigError as e:  # anything else (TypeError, AttributeError, ...) fails the test
        assert str(e)


# ---------------------------------------------------------------------------- training values and faults

TRAIN_VALUES = [
    ("--model.hops=0", "model.hops: expected between 1 and 20, found 0"),
    ("--model.hops=-1", "model.hops: expected between 1 and 20, found -1"),
    ("--model.dim=0", "model.dim: expected >= 1, found 0"),
    ("--train.batch_size=0", "train.batch_size: expected >= 1, found 0"),
    ("--train.restarts=-2", "train.restarts: expected between 1 and 1000, found -2"),
    ("--train.eval_every=0", "train.eval_every: expected >= 1, found 0"),
    ("--train.lr_decay_every=0", "train.lr_decay_every: expected >= 1, found 0"),
    ("--data.memory_size=0", "data.memory_size: expected >= 1, found 0"),
    ("--train.threads=0", "train.threads: expected between 1 and 256, found 0"),
    ("--train.lr=nan", "train.lr: expected a finite number > 0, found nan"),
    ("--train.lr=inf", "train.lr: expected a finite number > 0, found inf"),
    ("--model.init_std=nan", "model.init_std: expected a finite number > 0, found nan"),
    ("--train.epochs=0", "train.epochs: expected >= 1, found 0"),
    ("--train.device=tpu", "train.device: expected cpu, cuda, cuda:N or mps, found 'tpu'"),
    ("--train.device=cuda:7", "train.device: cuda:7 is not available here"),
    ("--model.masking=sometimes", "model.masking: expected one of off, hard, soft, second; found 'sometimes'"),
    ("--model.layers=2", "model.layers: a setting of model.type transformer and universal, not of memn2n"),
]


@pytest.mark.parametrize("override, message", TRAIN_VALUES, ids=[o for o, _ in TRAIN_VALUES])
def test_train_refuses_bad_values_and_writes_nothing(capsys, tiny, tmp_path, override, message):
    if "cuda:7" in override and __import__("torch").cuda.is_available():
        pytest.skip("a machine with a GPU")
    code, out, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", tmp_path / "run", "--quiet", override)
    assert_one_line(code, err, "train", message)
    assert not (tmp_path / "run").exists() or files(tmp_path / "run") == {}


def test_train_with_a_config_file_that_is_not_utf8(capsys, tiny, tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_bytes(b"train:\n  lr: \xff\n")
    code, _, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", tmp_path / "run", "--config", bad)
    assert_one_line(code, err, "train", "c.yaml: expected a UTF-8 text file, found byte 0xff")


def test_train_into_a_path_where_a_file_stands(capsys, tiny, tmp_path):
    (tmp_path / "run").write_text("mine")
    code, _, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", tmp_path / "run", "--quiet")
    assert_one_line(code, err, "train", "expected a run folder, found a file")
    assert (tmp_path / "run").read_text() == "mine"


def test_train_into_a_folder_that_cannot_be_made(capsys, tiny, tmp_path):
    (tmp_path / "afile").write_text("mine")  # a file where a parent folder would have to be
    code, _, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", tmp_path / "afile" / "run", "--quiet")
    assert_one_line(code, err, "train", f"{tmp_path / 'afile' / 'run'}: cannot make the run folder (Not a directory)")
    assert (tmp_path / "afile").read_text() == "mine"


@pytest.mark.parametrize("field, value, message", [
    ("model", "not a mapping", "the checkpoint's config is not a mapping of sections"),
    ("model", {"type": "memn2n", "hops": "three"}, "model.hops: expected int, found 'three'"),
    ("train", {"lr": float("nan")}, "train.lr: expected a finite number > 0"),
])
@pytest.mark.parametrize("command", ["eval", "inspect"])
def test_a_checkpoint_with_a_malformed_config(capsys, inspect_run, tmp_path, field, value, message, command):
    from memnet import checkpoint
    payload = checkpoint.read(inspect_run["checkpoint"])
    payload["config"][field] = value
    checkpoint.write(tmp_path / "bad.pt", {k: v for k, v in payload.items() if k != "format"})
    code, _, err = run(capsys, command, "--checkpoint", tmp_path / "bad.pt", "--data", inspect_run["data"])
    assert_one_line(code, err, command, message)


def test_eval_warns_about_a_checkpoint_with_weights_that_are_not_finite(capsys, inspect_run, tmp_path):
    from memnet import checkpoint
    payload = checkpoint.read(inspect_run["checkpoint"])
    payload["state_dict"]["tables"] = payload["state_dict"]["tables"] * float("nan")
    checkpoint.write(tmp_path / "nan.pt", {k: v for k, v in payload.items() if k != "format"})
    code, _, err = run(capsys, "eval", "--checkpoint", tmp_path / "nan.pt", "--data", inspect_run["data"])
    assert code == 0 and "holds weights that are not finite (tables): its answers mean nothing" in err


# ---------------------------------------------------------------------------- errors that point at the cause

SPACED = "1 Brian is a frog.\n2 Lily is gray.\n3 What color is Brian? gray 1 2\n"  # the README's seed, tabs lost


@pytest.mark.parametrize("command", ["inspect", "ask"])
def test_a_story_file_with_spaces_for_tabs_says_so(capsys, inspect_run, tmp_path, command):
    path = tmp_path / "seed.txt"
    for text, line in [(SPACED, 3), (SPACED.replace("3 What", "3 What color is Greg? white 1\n4 What"), 3)]:
        path.write_text(text)
        code, out, err = run(capsys, command, "--checkpoint", inspect_run["checkpoint"], "--story", path)
        assert_one_line(code, err, command, f"{path}:{line}: a question line's fields are separated by tabs; found spaces")
        assert out == ""


@pytest.mark.parametrize("command", ["show", "stats", "check"])
def test_a_task_file_with_spaces_for_tabs_says_so(capsys, tmp_path, command):
    (tmp_path / QA16_TEST.replace("test", "train")).write_text(SPACED)
    code, out, err = run(capsys, command, tmp_path)
    message = f"{tmp_path / QA16_TEST.replace('test', 'train')}:3: a question line's fields are separated by tabs; found spaces"
    if command == "check":
        assert code == 1 and err == "" and out.startswith(f"FAIL {message}")
    else:
        assert_one_line(code, err, command, message)


def test_ask_hints_at_an_answer_typed_after_the_question(capsys, inspect_run, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("Brian is a frog.\nWhat color is Brian? gray 1\n"
                                                 "What color is Brian?\tgray\t1\n"))
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"])
    assert code == 0 and out.count("has words after its '?'; type the question alone") == 2 and "Q: " not in out


@pytest.mark.parametrize("split", ["train", "valid"])
@pytest.mark.parametrize("text, found", [("", "an empty file"), ("1 Mary went to the kitchen.\n", "no question in it")])
def test_an_empty_train_or_valid_file_is_named(capsys, tiny, tmp_path, split, text, found):
    data = tmp_path / "data"
    shutil.copytree(tiny, data)
    (data / f"qa1_{split}.txt").write_text(text)
    code, _, err = run(capsys, "train", "--data", data, "--task", "1", "--out", tmp_path / "run", "--quiet")
    assert_one_line(code, err, "train", f"{data / f'qa1_{split}.txt'}: expected the {split} questions of task 1, found {found}")
    assert "no training questions" not in err


@pytest.mark.parametrize("argv", [
    ["train", "--data", "{tiny}", "--task", "1", "--out", ""],
    ["generate", "--task", "1", "--out", ""],
    ["inspect", "--checkpoint", "{model}", "--out", ""],
    ["report", "--checkpoint", "{model}", "--out", ""],
    ["bench", "--tasks", "1", "--data", "{tiny}", "--out", ""],
    ["data", "download", "--dir", "", "--from", "x.tar.gz"],
    ["inspect", "--checkpoint", "{model}", "--story", ""],
    ["train", "--data", "{tiny}", "--task", "1", "--out", "run", "--config", ""],
    ["bench", "--table", ""],
    ["bench", "--tasks", "1", "--data", "{tiny}", "--out", "b", "--choose-on-valid", ""],
], ids=lambda argv: " ".join(a for a in argv if a.startswith("--") and a not in ("--checkpoint", "--data", "--task", "--tasks")
                             and argv[argv.index(a) + 1] == "") + f" ({argv[0]})")
def test_an_empty_path_is_refused_not_read_as_the_current_folder(capsys, inspect_run, tiny, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    values = {"tiny": tiny, "model": inspect_run["checkpoint"], "run": inspect_run["checkpoint"].parent}
    code, out, err = run(capsys, *[a.format(**values) for a in argv])
    flag = argv[argv.index("") - 1]
    folder = flag == "--dir" or (flag == "--out" and argv[0] in ("train", "generate", "bench"))
    assert_one_line(code, err, argv[0], f"{flag}: expected a path, found an empty string (write . for the current folder)"
                    if folder else f"{flag}: expected a file's path, found an empty string")
    assert out == "" and files(tmp_path) == {}


def test_an_empty_checkpoint_path_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.pt").write_text("not the checkpoint anyone named")
    code, _, err = run(capsys, "ask", "--checkpoint", "")
    assert_one_line(code, err, "ask", "argument --checkpoint: expected a checkpoint file or a run folder, found an empty string")


def test_a_run_folder_of_an_empty_path_is_refused():
    from memnet.errors import MemnetError
    from memnet.run import RunFolder
    with pytest.raises(MemnetError, match="--out: expected a run folder, found an empty string"):
        RunFolder("")


HUGE = "x" * 3_000_000  # a word of megabytes: a message names it, it does not echo it


@pytest.mark.parametrize("argv", [
    ["train", "--data", "{tiny}", "--task", HUGE, "--out", "{tmp}/run"],
    ["train", "--data", HUGE, "--out", "{tmp}/run"],
    ["train", "--data", "{tiny}", "--task", "1", "--out", "{tmp}/run", "--config", HUGE],
    ["train", "--data", "{tiny}", "--task", "1", "--out", "{tmp}/run", "--model.dim=" + HUGE],
    ["train", "--data", "{tiny}", "--task", "1", "--out", "{tmp}/" + HUGE],
    ["train", "--data", "{tiny}", "--task", "1", "--out", "{tmp}/run", "--model." + HUGE + "=3"],
    ["inspect", "--checkpoint", HUGE],
    ["inspect", "--checkpoint", "{model}", "--story", HUGE],
    ["show", HUGE],
    ["generate", "--task", HUGE, "--out", "{tmp}/g"],
    ["eval", "--checkpoint", "{model}", "--split", HUGE],
    ["data", "download", "--from", HUGE, "--dir", "{tmp}/home"],
], ids=lambda argv: " ".join(a if len(a) < 40 else "HUGE" for a in argv[:1] + [a for a in argv[1:] if HUGE in a]))
def test_a_huge_word_in_a_flag_is_cut_in_the_message(capsys, inspect_run, tiny, tmp_path, argv):
    values = {"{tiny}": str(tiny), "{model}": str(inspect_run["checkpoint"]), "{tmp}": str(tmp_path)}
    code, out, err = run(capsys, *[values.get(a[:a.index("}") + 1], "") + a[a.index("}") + 1:] if a.startswith("{") else a
                                   for a in argv])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err[:500]
    assert len(err) < 2000 and "xxx…" in err, err[:500]
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing written


@pytest.mark.parametrize("command", ["inspect", "ask"])
@pytest.mark.parametrize("story, message", [
    (f"1 Brian is a frog.\n2 Greg is a frog.\n3 What color is {HUGE}?\n", "cannot answer: the story never mentions xxx"),
    (f"1 Brian is a frog.\n2 Greg is a frog.\n3 What color is Greg? {HUGE} 1\n", ":3: a question line's fields are "
                                                                               "separated by tabs; found spaces in 'What"),
    (f"1 Brian is a frog.\n2 Greg is a frog.\n3 {HUGE}\n", ":3: expected the story to end with a question ending in '?'"),
    (f"1 Brian is a frog.\n2 Greg is a frog.\n3 What color {HUGE} Greg?\n", "cannot answer: the model was never asked"),
], ids=["name", "spaced answer", "no question", "form"])
def test_a_huge_word_in_a_story_is_cut_in_the_message(capsys, inspect_run, tmp_path, command, story, message):
    path = tmp_path / "story.txt"
    path.write_text(story)
    code, out, err = run(capsys, command, "--checkpoint", inspect_run["checkpoint"], "--story", path)
    assert_one_line(code, err, command, message)
    assert len(err) < 1000 and ("…" in err or "..." in err) and out == ""


def test_a_huge_word_typed_to_ask_is_cut(capsys, inspect_run, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"Brian is a frog.\nGreg is {HUGE}.\nWhat color is {HUGE}?\n"
                                                 f"{HUGE}?\nWhat {HUGE}\n"))
    code, out, err = run(capsys, "ask", "--checkpoint", inspect_run["checkpoint"], "--min-probability", 0)
    assert code == 0 and len(out) + len(err) < 3000, (out[:300], err[:300])
    assert err == f"warning: the model never saw '{'x' * 39}…'; ignored\n"
    assert f"cannot answer: the model never saw '{'x' * 39}…' in training" in out
    assert f"cannot answer: the question '{'x' * 39}…' has no word the model knows" in out
    assert f"hint: 'What {'x' * 34}…' reads like a question" in out
