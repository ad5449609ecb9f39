"""Data subcommands: generate, show, stats, check, and `data download` (the official bAbI release)."""
from __future__ import annotations

import argparse
import json

from memnet import generator, official, solver, stats
from memnet.babi import SPLITS, BabiFormatError, Story, Task, find_task_file, folder_tasks, parse_tasks, read_file
from memnet.cli import integer
from memnet.errors import MemnetError
from memnet.files import kind
from memnet.generator import KNOB_MAX
from memnet.generator.categories import MAX_HOPS
from memnet.safe import shown

FOLDER_HELP = ("folder of bAbI files, or the name of an official set (en, en-valid, hn-10k, ...) "
               "that `memnet data download` fetched")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("generate", help="write bAbI-style task files from the simulated world",
                              description="Write bAbI-style task files from the simulated world. The knobs "
                                          "(--questions, --length, --actors, --distractors, --hops) change a task's "
                                          "official setting; a task refuses a knob its world does not use, and the "
                                          "message names the knobs it takes.")
    p.add_argument("--task", default="1-20", help="task number, range (1-20), list (1,2,16) or 'chain' (default: 1-20)")
    p.add_argument("--train", type=integer(0), default=1000, help="training questions per task (default: 1000; 0: no train file)")
    p.add_argument("--valid", type=integer(0), default=0, help="validation questions per task (default: 0, no valid file)")
    p.add_argument("--test", type=integer(0), default=1000, help="test questions per task (default: 1000; 0: no test file)")
    p.add_argument("--seed", type=integer(0), default=0, help="seed (default: 0); train, valid and test use disjoint streams of it")
    p.add_argument("--out", required=True, help="output folder (official file names)")
    p.add_argument("--questions", type=integer(1, KNOB_MAX), help="questions per story (default: the task's official setting)")
    p.add_argument("--length", type=integer(1, KNOB_MAX), help="story length (default: the task's official setting)")
    p.add_argument("--actors", type=integer(1, KNOB_MAX),
                   help="number of actors/entities (default: official; each task has its own range)")
    p.add_argument("--distractors", type=integer(0, KNOB_MAX), help="distractor sentences (default: official)")
    p.add_argument("--hops", type=integer(1, MAX_HOPS),
                   help=f"chain family: questions need 1..HOPS hops, HOPS at most {MAX_HOPS} (default: 4)")
    p.set_defaults(func=cmd_generate)

    p = subparsers.add_parser("show", help="print stories with their questions, answers and supporting facts")
    p.add_argument("dir", help=FOLDER_HELP)
    p.add_argument("--task", default="16", help="task number or 'chain' (default: 16)")
    p.add_argument("--split", default="train", choices=SPLITS, help="split (default: train)")
    p.add_argument("-n", type=integer(1), default=3, help="number of stories (default: 3)")
    p.set_defaults(func=cmd_show)

    p = subparsers.add_parser("stats", help="per task and split: stories, questions, lengths, vocabulary, answers")
    p.add_argument("dir", help=FOLDER_HELP)
    p.add_argument("--compare", metavar="OTHER_DIR",
                   help="hold this folder against another (e.g. the official set en)")
    p.add_argument("--task", help="only these tasks (default: all found)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_stats)

    p = subparsers.add_parser("check", help="format and solver check of a dataset; exit 0 only if all holds")
    p.add_argument("dir", help=FOLDER_HELP)
    p.add_argument("--task", help="only these tasks (default: all found)")
    p.add_argument("--show", type=integer(0), default=3, help="disagreements to print per file (default: 3)")
    p.set_defaults(func=cmd_check)

    data = subparsers.add_parser("data", help="the official bAbI v1.2 data: `memnet data download`",
                                 description="The official bAbI v1.2 release (Weston et al. 2015).")
    actions = data.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser(
        "download", help=f"fetch, check and unpack {official.ARCHIVE}",
        description=f"Fetch {official.ARCHIVE} (about 11.7 MB) from the first mirror that serves a good copy, "
                    "check every file before anything is written (the SHA-256 of each file of en/ and en-valid/; "
                    "the other sets' files read as bAbI stories of the task their names give) and unpack "
                    f"it into DIR/{official.RELEASE}/: {', '.join(official.SETS)}. "
                    "Afterwards --data takes a set's name (memnet train --data en-valid --task 1).")
    p.add_argument("--dir", help=f"folder to unpack into (default: $MEMNET_DATA, else ~/.cache/memnet; now "
                                 f"{official.data_home()}); set names find the copy only there")
    p.add_argument("--url", action="append", metavar="URL",
                   help="fetch from this URL instead of the known mirrors (repeat to try several in order)")
    p.add_argument("--from", dest="archive", metavar="FILE",
                   help=f"unpack {official.ARCHIVE} you already have instead of downloading it")
    p.add_argument("--force", action="store_true", help="download again and replace an existing copy")
    p.set_defaults(func=cmd_download)


def _folder(folder: str) -> None:
    if (found := kind(folder)) != "a folder":
        raise MemnetError(f"{folder}: expected a folder of bAbI files, found {found}")


def _tasks(spec: str | None, folder: str | None = None) -> list[Task]:
    if folder is not None:
        _folder(folder)
    if spec is None:
        tasks = folder_tasks(folder)
        if not tasks:
            raise MemnetError(f"{folder}: expected bAbI task files (qaN_<name>_<split>.txt or qaN_<split>.txt), found none")
        return tasks
    try:
        return parse_tasks(spec)
    except ValueError as e:
        raise MemnetError(str(e)) from None


def cmd_generate(args: argparse.Namespace) -> int:
    if args.train == args.valid == args.test == 0:
        raise MemnetError("--train, --valid and --test are all 0: expected at least one split with questions")
    tasks = _tasks(args.task)
    knobs = generator.Knobs(args.questions, args.length, args.actors, args.distractors, args.hops)
    available = generator.available_tasks()
    missing = [t for t in tasks if t not in available]
    if missing:
        raise MemnetError(f"no generator yet for task(s) {', '.join(map(str, missing))}")
    generator.unread_knobs(tasks, knobs, flag="--")  # a knob a task would ignore is refused, never dropped
    for task in tasks:  # every task's knobs, before the first file is written
        generator.check(task, knobs)
    for task in tasks:
        for path in generator.write_dataset(args.out, task, args.train, args.test, args.seed, knobs, args.valid):
            print(f"wrote {path}")
    return 0


def _print_story(story: Story) -> None:
    width = len(str(story.lines[-1].id))
    for line in story.lines:
        if line.is_question:
            support = " ".join(map(str, line.support))
            print(f"  {line.id:>{width}} {shown(line.text)}  ->  {shown(line.answer)}  (supporting facts {support})")
        else:
            print(f"  {line.id:>{width}} {shown(line.text)}")


def cmd_show(args: argparse.Namespace) -> int:
    args.dir = official.resolve_data_dir(args.dir)
    task = _tasks(args.task, args.dir)[0]
    path = find_task_file(args.dir, task, args.split)
    if path is None:
        raise MemnetError(f"{args.dir}: expected a {args.split} file for task {task}, found none")
    stories = read_file(path)
    for i, story in enumerate(stories[: args.n]):
        print(f"{path.name}: story {i + 1} of {len(stories)}")
        _print_story(story)
        print()
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    args.dir = official.resolve_data_dir(args.dir)
    args.compare = args.compare and official.resolve_data_dir(args.compare)
    tasks = _tasks(args.task, args.dir)
    ours = stats.folder_stats(args.dir, tasks)
    if args.compare:
        _folder(args.compare)
    theirs = stats.folder_stats(args.compare, tasks) if args.compare else None
    if args.json:
        print(json.dumps(stats.to_json(ours, theirs), indent=1))
    elif theirs is not None:
        print(stats.format_comparison(ours, theirs))
    else:
        print(stats.format_table(ours))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    args.dir = official.resolve_data_dir(args.dir)
    tasks = _tasks(args.task, args.dir)
    solvable = set(solver.available_tasks())
    ok = True
    for task in tasks:
        for split in SPLITS:
            path = find_task_file(args.dir, task, split)
            if path is None:
                continue
            try:
                stories = read_file(path)
            except BabiFormatError as e:
                print(f"FAIL {e}")
                ok = False
                continue
            n = sum(len(s.questions) for s in stories)
            if n == 0:
                print(f"FAIL {path}: expected at least one question, found none")
                ok = False
                continue
            if task not in solvable:
                print(f"ok   {path.name}: {n} questions parse (no solver for task {task})")
                continue
            wrong = solver.check(task, stories)
            ok &= not wrong
            print(f"{'ok  ' if not wrong else 'FAIL'} {path.name}: {n} questions, "
                  f"{len(wrong)} disagree with the solver")
            for d in wrong[: args.show]:
                print(f"       story {d.story + 1}, line {d.line} {d.question!r}: file says "
                      f"{shown(d.expected.answer)} ({' '.join(map(str, d.expected.support))}), solver says "
                      f"{shown(d.found.answer)} ({' '.join(map(str, d.found.support))})")
    return 0 if ok else 1


def cmd_download(args: argparse.Namespace) -> int:
    if args.archive is not None and args.url:
        raise MemnetError("--from FILE and --url URL exclude each other: give one")
    official.download(args.dir, args.url or official.MIRRORS, args.archive, args.force)
    return 0
