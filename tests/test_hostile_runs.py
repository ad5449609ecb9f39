"""Hostile input, continued from test_hostile.py (issue 71): each case asserts the exit status,
the message and the files left behind.

  long words   a story or task file holding a word of megabytes: tables, listings and pages
               show its first 40 characters and its length (json keeps the data whole)
  splits       an empty test file, a missing one, a train file too small to hold out valid:
               the file is named with what it holds
  resume       a flag (or a --config file) asking a resumed run for another value than it saved;
               an inspect flag that the mode chosen would not read (beside --story, or not with --all)
  paths        an empty path given to the Python API
  two runs     a second `memnet train` into a folder another is writing (two real processes),
               and a stale lock left by a run that was killed
  formats      a checkpoint of a format this memnet does not read (older or newer)
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from memnet import checkpoint
from memnet.cli import main
from memnet.errors import MemnetError

from test_hostile import assert_one_line, files  # the hostile suite's own checks: one line, and every file left

ROOT = Path(__file__).resolve().parents[1]
QA16_TEST = "qa16_basic-induction_test.txt"
WORD = "x" * 3_000_000  # a word of megabytes
CUT = f"{'x' * 40}… (3000000 characters)"  # how a table shows it


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- long words


@pytest.fixture
def long_story(tmp_path) -> Path:
    path = tmp_path / "story.txt"
    path.write_text(f"1 Brian is a frog.\n2 Greg is {WORD} .\n3 Greg is a frog.\n4 What color is Greg?\tyellow\t3 1\n")
    return path


@pytest.mark.parametrize("argv", [["inspect"], ["inspect", "--format", "markdown"], ["ask"]],
                         ids=lambda argv: " ".join(argv))
def test_a_table_cuts_a_word_of_megabytes(capsys, inspect_run, long_story, argv):
    code, out, err = run(capsys, *argv, "--checkpoint", inspect_run["checkpoint"], "--story", long_story)
    assert code == 0 and CUT in out and len(out) < 5000, out[:500]
    assert err == f"warning: the model never saw '{'x' * 39}…'; ignored\n"


def test_json_keeps_a_long_word_whole(capsys, inspect_run, long_story):
    code, out, _ = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", long_story,
                       "--format", "json")
    assert code == 0 and json.loads(out)["memories"][1]["text"] == f"Greg is {WORD} ."  # data, not a table


def test_show_and_report_cut_a_word_of_megabytes(capsys, inspect_run, long_story, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(long_story, data / QA16_TEST)
    code, out, err = run(capsys, "show", data, "--task", "16", "--split", "test", "-n", "1")
    assert code == 0 and err == "" and out.splitlines()[2] == f"  2 Greg is {CUT} ." and len(out) < 1000
    code, out, err = run(capsys, "report", "--checkpoint", inspect_run["checkpoint"], "--data", data,
                         "--out", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert code == 0 and f"<td>Greg is {CUT} .</td>" in page and len(page) < 20_000


# ---------------------------------------------------------------------------- splits


@pytest.fixture
def qa1_copy(tiny, tmp_path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(tiny, data)
    return data


def test_train_names_an_empty_test_file(capsys, qa1_copy, tmp_path):
    (qa1_copy / "qa1_test.txt").write_text("")
    code, _, err = run(capsys, "train", "--data", qa1_copy, "--task", "1", "--out", tmp_path / "run", "--quiet")
    assert_one_line(code, err, "train", f"{qa1_copy / 'qa1_test.txt'}: expected the test questions of task 1, found "
                                        "an empty file; remove it to go without a test split")
    assert not (tmp_path / "run").exists()


def test_train_names_a_train_file_too_small_to_hold_out_valid(capsys, qa1_copy, tmp_path):
    (qa1_copy / "qa1_valid.txt").unlink()
    (qa1_copy / "qa1_train.txt").write_text("1 Mary went to the kitchen.\n2 Where is Mary?\tkitchen\t1\n")
    code, _, err = run(capsys, "train", "--data", qa1_copy, "--task", "1", "--out", tmp_path / "run", "--quiet")
    assert_one_line(code, err, "train", f"{qa1_copy / 'qa1_train.txt'}: expected enough stories of task 1 to split "
                                        "into train and valid (data.valid_fraction 0.1), found 1 with questions; add "
                                        "stories, or a valid file beside it")
    assert "no training questions" not in err and not (tmp_path / "run").exists()


@pytest.mark.parametrize("what, message", [
    ("missing", "{data}: expected a test file for task 1 (qa1_single-supporting-fact_test.txt), found no such file"),
    ("empty", "{data}/qa1_test.txt: expected the test questions of task 1, found an empty file"),
    ("no question", "{data}/qa1_test.txt: expected the test questions of task 1, found no question in it"),
])
def test_eval_names_the_test_file(capsys, qa1_run, qa1_copy, what, message):
    test = qa1_copy / "qa1_test.txt"
    if what == "missing":
        test.unlink()
    else:
        test.write_text("" if what == "empty" else "1 Mary went to the kitchen.\n")
    code, out, err = run(capsys, "eval", "--checkpoint", qa1_run["checkpoint"], "--data", qa1_copy)
    assert_one_line(code, err, "eval", message.format(data=qa1_copy))
    assert out == ""


# ---------------------------------------------------------------------------- resume


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, tiny) -> Path:
    """A finished 1-epoch qa1 run at d = 12 (any run with last.pt can be resumed)."""
    folder = tmp_path_factory.mktemp("resume") / "run"
    assert main(["train", "--data", str(tiny), "--task", "1", "--out", str(folder), "--quiet", "--config", "none",
                 "--model.dim=12", "--train.epochs=1", "--train.linear_start_epochs=0", "--train.threads=1"]) == 0
    return folder


@pytest.mark.parametrize("flags, message", [
    (["--model.dim=30"], "--model.dim 30: the run in {run} was saved with model.dim 12"),
    (["--train.epochs=5"], "--train.epochs 5: the run in {run} was saved with train.epochs 1"),
    (["--task", "2"], "--task 2: the run in {run} was saved with data.task '1'"),
    (["--data", "{other}"], "--data {other}: the run in {run} was saved with data.dir '{tiny}'"),
    (["--config", "paper"], "--config paper sets model.dim 20: the run in {run} was saved with model.dim 12"),
    (["--model.masking=hard", "--model.dim=12"], "--model.masking hard: the run in {run} was saved with model.masking 'off'"),
])
def test_resume_refuses_a_flag_that_differs_from_the_saved_config(capsys, stopped, tiny, tmp_path, flags, message):
    values = {"run": stopped, "other": tmp_path, "tiny": tiny}
    before = files(stopped)
    code, out, err = run(capsys, "train", "--out", stopped, "--resume", "--quiet", *[f.format(**values) for f in flags])
    assert_one_line(code, err, "train", message.format(**values))
    assert "a resumed run keeps its config; drop " in err and "(or --force starts the run again with it)" in err
    assert files(stopped) == before and out == ""


def test_resume_takes_flags_that_repeat_the_saved_config(capsys, stopped, tiny):
    code, out, err = run(capsys, "train", "--out", stopped, "--resume", "--quiet", "--model.dim=12", "--task", "1",
                         "--data", tiny, "--config", "none", "--train.epochs=1")
    assert code == 0 and "a resumed run keeps" not in err and f"wrote {stopped / 'model.pt'}" in out


@pytest.mark.parametrize("flag", [["--data", "{data}"], ["--task", "16"], ["--split", "valid"], ["--index", "0"], ["--all"]],
                         ids=lambda flag: flag[0])
def test_inspect_refuses_a_data_flag_beside_a_story(capsys, inspect_run, long_story, flag):
    code, out, err = run(capsys, "inspect", "--checkpoint", inspect_run["checkpoint"], "--story", long_story,
                         *[f.format(data=inspect_run["data"]) for f in flag])
    assert_one_line(code, err, "inspect", f"{flag[0]}: --story gives the question itself, {flag[0]} picks questions of "
                                          "a data set; drop one of the two")
    assert out == ""


# ---------------------------------------------------------------------------- paths


def test_the_api_refuses_an_empty_output_path(tmp_path, monkeypatch):
    import memnet
    from memnet.files import atomic_write

    monkeypatch.chdir(tmp_path)
    with pytest.raises(MemnetError, match=r"^out: expected a folder, found an empty string \(write '\.' for the current"):
        memnet.generate(1, 5, out="")
    with pytest.raises(MemnetError, match="^expected a file's path to write, found an empty string$"):
        atomic_write("", "text")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- two runs into one folder

LONG_RUN = ["--quiet", "--config", "none", "--model.dim=8", "--train.epochs=100000", "--train.eval_every=1",
            "--train.linear_start_epochs=0", "--train.threads=1"]


def _memnet(*argv) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT's default action: a shell's background job would otherwise ignore the test's Ctrl-C
    return subprocess.Popen([sys.executable, "-m", "memnet", *map(str, argv)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def test_a_second_run_into_a_folder_being_written_is_refused(capsys, tiny, tmp_path):
    out = tmp_path / "run"
    first = _memnet("train", "--data", tiny, "--task", "1", "--out", out, *LONG_RUN)
    try:
        _wait_for(out / "metrics.jsonl", first)  # the first run has evaluated once: it holds the lock
        assert (out / "lock").read_text() == f"{first.pid} {socket.gethostname()}\n"
        for extra in ([], ["--force"], ["--resume"]):
            code, printed, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", out, "--quiet", *extra)
            assert_one_line(code, err, "train", f"{out}: another memnet train (pid {first.pid}) is writing this run "
                                                f"folder now; wait for it to end, or choose another --out (if no run "
                                                f"is writing it, remove {out / 'lock'})")
            assert printed == ""
    finally:
        first.send_signal(signal.SIGINT)  # Ctrl-C: the first run keeps its best model and evaluates
        printed, err = first.communicate(timeout=120)
    assert first.returncode == 130 and "error" not in err, err
    assert f"wrote {out / 'model.pt'}" in printed
    # the first run's files whole, its own, and its lock gone
    assert sorted(files(out)) == ["config.yaml", "last.pt", "metrics.jsonl", "model.pt"]
    assert "epochs: 100000" in (out / "config.yaml").read_text()
    assert all(json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines())
    checkpoint.load(out / "model.pt")


@pytest.fixture
def ended_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_stale_lock_is_taken_over(capsys, tiny, tmp_path, ended_pid):
    out = tmp_path / "run"
    out.mkdir()
    (out / "lock").write_text(f"{ended_pid} {socket.gethostname()}\n")  # a run killed with SIGKILL leaves this
    code, _, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", out, "--quiet", "--config", "none",
                       "--train.epochs=1", "--train.linear_start_epochs=0")
    assert code == 0, err
    assert sorted(files(out)) == ["config.yaml", "last.pt", "metrics.jsonl", "model.pt"]


@pytest.mark.parametrize("holder, who", [("live", "pid {pid}"), ("other host", "pid 1 on host elsewhere"),
                                         ("garbled", "a process its lock does not name")])
def test_a_lock_held_or_unreadable_refuses_the_run(capsys, tiny, tmp_path, holder, who):
    out = tmp_path / "run"
    out.mkdir()
    lock = {"live": f"{os.getpid()} {socket.gethostname()}\n", "other host": "1 elsewhere\n", "garbled": "\x00\x01"}[holder]
    (out / "lock").write_text(lock)
    code, _, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", out, "--quiet", "--force")
    assert_one_line(code, err, "train", f"another memnet train ({who.format(pid=os.getpid())}) is writing this run folder")
    assert files(out) == {"lock": lock.encode()}


def test_a_lock_taken_after_the_first_look_still_refuses(tmp_path):
    from memnet.run import RunFolder

    run_folder = RunFolder(tmp_path / "run")  # looks: no lock yet
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "lock").write_text(f"{os.getpid()} {socket.gethostname()}\n")  # another run takes it now
    with pytest.raises(MemnetError, match=f"another memnet train \\(pid {os.getpid()}\\) is writing"):
        run_folder.lock()
    assert not run_folder.locked
    run_folder.release()  # not its lock: left alone
    assert (tmp_path / "run" / "lock").exists()


def test_a_fifo_named_lock_is_not_read(capsys, tiny, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    os.mkfifo(out / "lock")  # reading it would block
    code, _, err = run(capsys, "train", "--data", tiny, "--task", "1", "--out", out, "--quiet")
    assert_one_line(code, err, "train", f"{out / 'lock'}: expected a run's lock file, found a FIFO; remove it")


# ---------------------------------------------------------------------------- checkpoint formats


@pytest.mark.parametrize("found, message", [
    ("memnet-1", "an older memnet wrote it: train the model again with this memnet (memnet train)"),
    ("memnet-0", "an older memnet wrote it: train the model again with this memnet (memnet train)"),
    ("memnet-4", "a newer memnet wrote it: upgrade memnet to read it"),
])
@pytest.mark.parametrize("command", ["eval", "inspect", "ask", "report"])
def test_a_checkpoint_of_another_memnet_format(capsys, inspect_run, tmp_path, found, message, command):
    payload = checkpoint.read(inspect_run["checkpoint"])
    torch.save({**payload, "format": found}, tmp_path / "old.pt")
    (tmp_path / "s.txt").write_text("1 Greg is a frog.\n2 What color is Greg?\n")
    extra = {"eval": [], "inspect": [], "ask": ["--story", tmp_path / "s.txt"], "report": ["--out", tmp_path / "r.html"]}
    code, out, err = run(capsys, command, "--checkpoint", tmp_path / "old.pt", *extra[command])
    assert_one_line(code, err, command, f"{tmp_path / 'old.pt'}: a checkpoint of format '{found}', which this memnet "
                                        f"cannot read (it reads memnet-3, and memnet-2 by converting it); {message}")
    assert out == "" and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("payload, found", [({"format": "other"}, "found format 'other'"),
                                            ({"weights": 1}, "found a dict without a format"),
                                            ([1, 2], "found a list")])
def test_a_torch_file_that_is_no_memnet_checkpoint(capsys, tmp_path, payload, found):
    torch.save(payload, tmp_path / "x.pt")
    code, _, err = run(capsys, "eval", "--checkpoint", tmp_path / "x.pt")
    assert_one_line(code, err, "eval", f"{tmp_path / 'x.pt'}: not a memnet checkpoint (expected a dict with format "
                                       f"'memnet-3' or 'memnet-2', {found})")


def test_resume_from_a_last_pt_of_an_older_format(capsys, stopped, tmp_path):
    run_folder = tmp_path / "run"
    shutil.copytree(stopped, run_folder)
    state = torch.load(run_folder / "last.pt", weights_only=True)
    torch.save({**state, "format": "memnet-1"}, run_folder / "last.pt")
    before = files(run_folder)
    code, _, err = run(capsys, "train", "--out", run_folder, "--resume", "--quiet")
    assert_one_line(code, err, "train", f"{run_folder / 'last.pt'}: a checkpoint of format 'memnet-1', which this "
                                        "memnet cannot read (it reads memnet-3, and memnet-2 by converting it); an older "
                                        "memnet wrote it: it cannot be resumed by this one (--force starts the run again)")
    assert files(run_folder) == before
