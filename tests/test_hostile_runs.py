"""Hostile input, continued from test_hostile.py (issue 71): each case asserts the exit status,
the message and the files left behind.

  long words   a story or task file holding a word of megabytes: tables, listings and pages
               show its first 40 characters and its length (json keeps the data whole)
"""
import io
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

ROOT = Path(__file__).resolve().parents[1]
QA16_TEST = "qa16_basic-induction_test.txt"
WORD = "x" * 3_000_000  # a word of megabytes
CUT = f"{'x' * 40}… (3000000 characters)"  # how a table shows it


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(code, err, command, message, status=2):
    assert code == status, err
    assert err.startswith(f"memnet {command}: error: ") and err.count("\n") == 1, err
    assert message in err, err


def files(folder: Path) -> dict[str, bytes]:
    """Every regular file under `folder` (temporary and lock files included) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


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
