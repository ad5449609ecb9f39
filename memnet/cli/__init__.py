"""The memnet command line: a thin layer over the library.

Each module of this package registers its subcommands; each subcommand parses its flags
and calls one library function. Errors the user can fix print one line and exit with
status 2, never a traceback: a bad flag (argparse, without the usage block), a MemnetError
(bad input, a bad value, an unwritable output: the library names the file or the key), or
an OSError that slipped past the library (its file and reason). Any other exception is a
bug in memnet and keeps its traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from memnet import __version__, registry
from memnet.errors import MemnetError, interrupted

# modules that each define register(subparsers): data (generate, show, stats, check),
# training (train, eval), inspection (inspect, report, ask), bench
MODULES = ["data", "training", "inspection", "bench"]


# the flags (by dest) that name a file or folder: an empty string there is refused before any work
PATHS = {"out": "--out", "data": "--data", "story": "--story", "config": "--config", "dir": "DIR",
         "compare": "--compare", "archive": "--from", "table": "--table", "candidates": "--choose-on-valid"}
# those that name a file ('.' is no way out there): --out names a folder for these commands alone
FILES = {"story", "config", "archive", "table", "candidates"}
FOLDER_OUT = {"train", "generate", "bench"}


class Parser(argparse.ArgumentParser):
    """argparse with its error as one line: 'memnet generate: error: argument --train: ...'."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {shortened(message)} (see {self.prog} --help)\n")


def integer(lo: int, hi: int | None = None):
    """An argparse type: a whole number in lo..hi (hi None: no bound), else a one-line error with the range."""
    allowed = f"a whole number from {lo} to {hi}" if hi is not None else f"a whole number >= {lo}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {allowed}, found {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"expected {allowed}, found {value}")
        return value

    return parse


def probability(text: str) -> float:
    """An argparse type: a number from 0 to 1, else a one-line error saying so."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, found {text!r}") from None
    if not 0 <= value <= 1:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, found {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="memnet", description="bAbI-style stories, End-to-End Memory Networks with a stopping rule and "
        "visited-memory masking, and per-hop attention tables.")
    parser.add_argument("--version", action="version", version=f"memnet {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in MODULES:
        importlib.import_module(f"memnet.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:  # before the flags are made: a plug-in's model types have flags of their own (memnet.registry)
        registry.load_plugins()
    except MemnetError as e:
        print(f"memnet: error: {e}", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error argparse has printed: its status, as for any command
        return e.code if isinstance(e.code, int) else 2
    empty = next((name for name in PATHS if getattr(args, name, None) == ""), None)
    if empty is not None:  # Path('') is the current folder: a run or a file would land there unasked
        flag = "--dir" if args.command == "data" else PATHS[empty]
        if empty in FILES or (empty == "out" and args.command not in FOLDER_OUT):
            return _fail(args.command, f"{flag}: expected a file's path, found an empty string")
        return _fail(args.command, f"{flag}: expected a path, found an empty string (write . for the current folder)")
    try:
        status = args.func(args) or 0
    except MemnetError as e:
        return _fail(args.command, str(e))
    except BrokenPipeError:  # `memnet show ... | head`: the reader has all it wanted
        _silence_stdout()
        return 0
    except OSError as e:  # a read or write the library did not expect to fail
        if e.filename is None:  # no file named: standard output, whose buffer filled up
            _silence_stdout()
            return _fail(args.command, f"cannot write to standard output ({e.strerror or e})")
        return _fail(args.command, f"{e.filename}: {e.strerror or e}")
    except (KeyboardInterrupt, SystemError) as e:  # SystemError: Ctrl-C inside a Numba function (errors.interrupted)
        if not interrupted(e):
            raise
        print("interrupted", file=sys.stderr)
        return 130
    try:
        sys.stdout.flush()  # here, not at exit: a full disk on stdout is an error like any other
    except BrokenPipeError:
        _silence_stdout()
    except OSError as e:
        _silence_stdout()
        return _fail(args.command, f"cannot write to standard output ({e.strerror or e})")
    return status


def _fail(command: str, message: str) -> int:
    print(f"memnet {command}: error: {shortened(message)}", file=sys.stderr)
    return 2


LONGEST = 200  # characters of one word in an error message; a typed or read word can be megabytes long


def shortened(message: str) -> str:
    """`message` with every word (a run of non-blanks) longer than LONGEST cut, an ellipsis
    marking the cut: an error names its input, it does not echo megabytes of it."""
    def cut(m: re.Match) -> str:
        word = m.group(0)
        return word[: LONGEST // 2] + "…" + re.search(r"[^\w/]{0,3}$", word).group(0)  # a closing quote or colon stays

    return re.sub(rf"\S{{{LONGEST + 1},}}", cut, message)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (a test's captured stdout): nothing to silence
        pass
