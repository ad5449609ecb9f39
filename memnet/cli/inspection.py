"""Inspection subcommands: inspect (attention tables), report (an HTML page), ask (interactive),
serve (ask from a local web page)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memnet import official
from memnet.babi import SPLITS, parse_tasks
from memnet.cli import integer, probability
from memnet.cli.common import CHECKPOINT_HELP, checkpoint_file, data_folder
from memnet.errors import MemnetError
from memnet.files import atomic_write

if TYPE_CHECKING:
    from memnet.inspect import Table

# The commands import the modules they run (memnet.inspect, checkpoint, report, ask): those
# load torch, which `memnet --help` and the data commands need not wait for.
FORMATS = ("text", "markdown", "json", "csv", "png")  # memnet.inspect.FORMATS (a test keeps them equal)
MIN_PROBABILITY = 0.5  # memnet.ask.MIN_PROBABILITY (a test keeps them equal)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, type=checkpoint_file, help=CHECKPOINT_HELP)
    p.add_argument("--data",
                   help="folder of bAbI files, or an official set's name (en-valid, ...) after `memnet data download` "
                        "(default: the folder the model was trained on)")
    p.add_argument("--task", help="task number or 'chain' (default: the model's task when it has one)")
    # None (not "test"): inspect tells a --split given from one left out (_unread_flags)
    p.add_argument("--split", choices=SPLITS, help="split to read questions from (default: test)")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("inspect", help="per-hop attention table of one question (or many)")
    _common(p)
    p.add_argument("--index", type=integer(0), help="question number in the split, from 0 (default: 0)")
    p.add_argument("--story", help="a story file in bAbI format ending in one question (answer optional), instead "
                                   "of --data, --task, --split, --index and --all; a question the model cannot answer "
                                   "is declined")
    p.add_argument("--all", action="store_true", help="walk the split's questions instead of one")
    p.add_argument("--limit", type=integer(1), help="with --all: show at most this many questions")
    p.add_argument("--wrong-only", action="store_true", help="with --all: only questions answered wrongly")
    p.add_argument("--format", default="text", choices=FORMATS,
                   help="text (default), markdown, json, csv or png (a heatmap; needs --out)")
    p.add_argument("--out", help="write to this file instead of standard output (required for png)")
    _color_flag(p, "; always also colours the text written to --out, as to standard output")
    p.add_argument("--heads", action="store_true",
                   help="transformer models: also the question's attention per layer and head (text, markdown, json)")
    _min_probability(p, "with --story: ", default=None)  # None: given or not (_unread_flags)
    p.set_defaults(func=cmd_inspect)

    p = subparsers.add_parser("report", help="a self-contained HTML report: metrics and every attention table")
    _common(p)
    p.add_argument("--out", required=True, help="HTML file to write")
    p.add_argument("--limit", type=integer(1), help="attention tables of the first LIMIT questions and of every "
                                                    "wrong answer (default: all questions)")
    p.set_defaults(func=cmd_report)

    p = subparsers.add_parser(
        "ask", help="type a story and a question; the model answers and shows its attention",
        description="Type story sentences one per line, then a question ending in '?' (line editing and history on "
                    "a terminal). The model says 'cannot answer', with the reason, to a question of a form it was "
                    "never asked in training, about a name the story never mentions or with a word it never saw, to "
                    "a story or question with no word it knows, and when its answer's probability is under "
                    "--min-probability; it lists the forms it knows when it starts. A word it knows in another "
                    "spelling (colour, grey) is read as its own, with a note.")
    p.add_argument("--checkpoint", required=True, type=checkpoint_file, help=CHECKPOINT_HELP)
    p.add_argument("--story", help="answer the question at the end of this story file (bAbI format) and exit")
    p.add_argument("--format", default="text", choices=("text", "markdown", "json"), help="table format (default: text)")
    _color_flag(p)
    _min_probability(p)
    p.set_defaults(func=cmd_ask)

    p = subparsers.add_parser(
        "serve", help="ask in a local web page: answers and attention heat maps",
        description="Serve a page on 127.0.0.1 (this machine only; it loads nothing from elsewhere) where you type "
                    "a story, one sentence per line, and a question: it shows the answer, or 'cannot answer' and why "
                    "by the rules of `memnet ask`, and each hop's attention as a heat map. Ctrl-C stops it.")
    p.add_argument("--checkpoint", required=True, type=checkpoint_file, help=CHECKPOINT_HELP)
    p.add_argument("--port", type=integer(0, 65535), default=8000,
                   help="port to listen on at 127.0.0.1 (default: 8000); 0 picks a free one")
    _min_probability(p)
    p.set_defaults(func=cmd_serve)


def _color_flag(p: argparse.ArgumentParser, more: str = "") -> None:
    # None, not "auto": a --color given is told from one left out (_unread_color)
    p.add_argument("--color", choices=("auto", "always", "never"),
                   help="colour the text format: auto (the default: on a terminal, unless NO_COLOR is set), always, "
                        f"never{more}; the other formats have no colour and refuse it")


def _min_probability(p: argparse.ArgumentParser, when: str = "", default: float | None = MIN_PROBABILITY) -> None:
    p.add_argument("--min-probability", type=probability, default=default, metavar="P",
                   help=f"{when}say 'cannot answer' when the model gives its answer a probability under P "
                        f"(default: {MIN_PROBABILITY}); 0 always answers")


def _task(spec: str | None, cfg) -> int | str:
    spec = spec or cfg.data.task
    try:
        tasks = parse_tasks(spec)
    except ValueError as e:
        raise MemnetError(str(e)) from None
    if len(tasks) != 1:
        raise MemnetError(f"the model was trained on tasks {spec}: choose one with --task")
    return tasks[0]


def _questions(args: argparse.Namespace, cfg) -> tuple[str, int | str, list]:
    folder = data_folder(official.resolve_data_dir(args.data) if args.data else None, cfg.data.dir, args.checkpoint)
    from memnet.inspect import load_samples

    task = _task(args.task, cfg)
    return folder, task, load_samples(folder, task, args.split, cfg.data.valid_fraction)


def _unread_color(args: argparse.Namespace) -> None:
    """--color given with a format that has no colour is refused, never silently ignored."""
    if args.color is not None and args.format != "text":
        raise MemnetError(f"--color: colours the text format only, and --format {args.format} has no colour; "
                          f"drop --color")


def _color(args: argparse.Namespace, stream) -> bool:
    """Whether to colour text written to `stream` (None: a file of --out, which is no terminal).
    `always` colours a file too, as it does standard output redirected to one."""
    from memnet.inspect import use_color

    return args.color == "always" or (args.color in (None, "auto") and stream is not None and use_color(stream))


def _warn(tables: list[Table]) -> None:
    from memnet.safe import cut

    unknown = sorted({w for t in tables for w in t.unknown})
    if unknown:
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        print(f"warning: the model never saw {', '.join(repr(cut(w, 40)) for w in unknown[:10])}{more}; ignored",
              file=sys.stderr)


def _note(note: str) -> None:
    print(f"note: {note}", file=sys.stderr)


def _load(path: str):
    from memnet import api

    model = api.load(path)
    return model.module, model.config, model.vocab, model.checkpoint


def _emit(text: str, out: str | None) -> None:
    if out:
        atomic_write(out, text)
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def _unread_flags(args: argparse.Namespace) -> None:
    """inspect's flags that the mode chosen would not read are refused, never silently ignored;
    then the defaults of those left out are filled in."""
    if args.story:
        picks = [("--data", args.data), ("--task", args.task), ("--split", args.split), ("--index", args.index),
                 ("--all", args.all)]
        given = next((flag for flag, value in picks if value is not None and value is not False), None)  # --index 0 too
        if given:
            raise MemnetError(f"{given}: --story gives the question itself, {given} picks questions of a data set; "
                              f"drop one of the two")
    elif args.min_probability is not None:
        raise MemnetError("--min-probability: declines the answer to a --story question; a data set's questions are "
                          "shown as the model answers them (drop it, or give --story)")
    if args.all and args.index is not None:
        raise MemnetError("--index: picks one question, --all walks the split; drop one of the two")
    for flag, value in (("--limit", args.limit), ("--wrong-only", args.wrong_only)):
        if value and not args.all:
            raise MemnetError(f"{flag} goes with --all (walk the split's questions): add --all, or drop {flag}")
    args.split, args.index = args.split or "test", args.index or 0
    args.min_probability = MIN_PROBABILITY if args.min_probability is None else args.min_probability


def cmd_inspect(args: argparse.Namespace) -> int:
    _unread_flags(args)
    _unread_color(args)
    if args.format == "png" and not args.out:
        raise MemnetError("--format png needs --out FILE")
    if args.format == "png" and args.all:
        raise MemnetError("--format png draws one question; drop --all")
    from memnet import ask, inspect

    model, cfg, vocab, _ = _load(args.checkpoint)
    if args.story:
        tables = [ask.answer(model, vocab, cfg, inspect.read_story(args.story), label=Path(args.story).name,
                             min_probability=args.min_probability, heads=args.heads, say=_note)]
    else:
        _, _, questions = _questions(args, cfg)
        if args.all:
            tables = inspect.inspect_samples(model, vocab, cfg, questions,
                                             [f"{args.split} #{i}" for i in range(len(questions))], heads=args.heads)
            total, wrong = len(tables), sum(t.correct is False for t in tables)
            if args.wrong_only:
                tables = [t for t in tables if t.correct is False]
            tables = tables[: args.limit] if args.limit is not None else tables
            print(f"showing {len(tables)} of {total} {args.split} questions ({wrong} answered wrongly)", file=sys.stderr)
            if not tables:
                return 0
        else:
            if not 0 <= args.index < len(questions):
                raise MemnetError(f"--index {args.index} is out of range: the {args.split} split has "
                                  f"{len(questions)} questions (0..{len(questions) - 1})")
            tables = inspect.inspect_samples(model, vocab, cfg, [questions[args.index]], [f"{args.split} #{args.index}"],
                                             heads=args.heads)
    _warn(tables)
    if args.format == "png":
        inspect.heatmap(tables[0], args.out)
        print(f"wrote {args.out}", file=sys.stderr)
        return 0
    _emit(inspect.render(tables, args.format, color=_color(args, None if args.out else sys.stdout)), args.out)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from memnet import report

    args.split = args.split or "test"
    model, cfg, vocab, _ = _load(args.checkpoint)
    folder, task, questions = _questions(args, cfg)
    html = report.build(model, vocab, cfg, questions, title=f"{args.checkpoint} on {folder}, task {task}, {args.split}",
                        limit=args.limit, task=task)
    report.write(args.out, html)
    print(f"wrote {args.out}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    _unread_color(args)
    from memnet import ask, inspect

    model, cfg, vocab, _ = _load(args.checkpoint)
    color = _color(args, sys.stdout)
    if args.story:
        tables = [ask.answer(model, vocab, cfg, inspect.read_story(args.story), min_probability=args.min_probability,
                             say=_note)]
        _warn(tables)
        sys.stdout.write(inspect.render(tables, args.format, color=color))
        return 0
    ask.session(model, vocab, cfg, sys.stdin, sys.stdout, fmt=args.format, color=color,
                prompt=sys.stdin.isatty(), min_probability=args.min_probability)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from memnet import api, serve

    return serve.serve(api.load(args.checkpoint), args.port, args.min_probability)
