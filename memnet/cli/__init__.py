"""The memnet command line: a thin layer over the library.

Each module of this package registers its subcommands; each subcommand parses its flags
and calls one library function. Errors the user can fix (MemnetError) print one line and
exit with status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from memnet import __version__
from memnet.errors import MemnetError

# modules that each define register(subparsers): data (generate, show, stats, check),
# training (train, eval), inspection (inspect, report, ask)
MODULES = ["data", "training", "inspection"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memnet", description="bAbI-style stories, End-to-End Memory Networks with a stopping rule and "
        "visited-memory masking, and per-hop attention tables.")
    parser.add_argument("--version", action="version", version=f"memnet {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in MODULES:
        importlib.import_module(f"memnet.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except MemnetError as e:
        print(f"memnet {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
