"""The story generator: every bAbI task (and memnet's chain family) from a simulated world.

Each task module registers a function ``story(rng, knobs) -> Story`` that builds one story
from its own small world simulation, using only the `random.Random` it is given, together
with the knobs that function reads (``@register(1, knobs=...)``): a knob given to a task
that does not read it is refused, never silently ignored (`unread_knobs`). The
dataset is then a pure function of (task, split, size, seed): the same arguments give
byte-identical files on any machine, and train and test draw from disjoint seed streams.
"""
from __future__ import annotations

import importlib
import random
from dataclasses import dataclass
from pathlib import Path
from dataclasses import fields
from typing import Callable, Collection, Iterator

from memnet.babi import CHAIN, TASK_NAMES, Line, Story, Task, space_before_tab, task_filename, write_file
from memnet.errors import MemnetError


class KnobError(MemnetError):
    """A knob outside what a task can tell a story with: 'actors: expected 1 to 4, found 9'."""


KNOB_MAX = 1000


@dataclass(frozen=True)
class Knobs:
    """Optional changes to a task's official setting; None keeps the official default.

    Each task declares the knobs it honours when it registers (HONOURS); a knob given (not
    None) to a task that does not honour it is refused.
    """

    questions: int | None = None  # questions per story
    length: int | None = None  # story length: facts per story, or facts between questions
    actors: int | None = None  # number of actors / entities in the world
    distractors: int | None = None  # irrelevant sentences mixed in
    hops: int | None = None  # chain family: questions need 1..hops hops (default 4)

    def __post_init__(self):
        # 0 must not read as "the official setting" (the tasks write `knobs.questions or 5`), and
        # a story is told whole before it is cut to size: the bound keeps one story small
        for name, lo in [("questions", 1), ("length", 1), ("actors", 1), ("distractors", 0), ("hops", 1)]:
            value = getattr(self, name)
            if value is not None and not lo <= value <= KNOB_MAX:
                raise KnobError(f"{name}: expected {lo} to {KNOB_MAX}, found {value}")

    def given(self) -> list[str]:
        """The names of the knobs set (not None), in field order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]


def knob(value: int | None, default: int, lo: int, hi: int | None, name: str) -> int:
    """`value` (None: the task's `default`) checked against the task's range lo..hi (hi None: no bound)."""
    n = default if value is None else value
    if n < lo or (hi is not None and n > hi):
        raise KnobError(f"{name}: expected {lo} to {hi} for this task, found {n}" if hi is not None
                        else f"{name}: expected at least {lo} for this task, found {n}")
    return n

StoryFn = Callable[[random.Random, Knobs], Story]
GENERATORS: dict[Task, StoryFn] = {}
HONOURS: dict[Task, tuple[str, ...]] = {}  # task -> the knobs its story function reads, in field order
KNOB_NAMES = tuple(f.name for f in fields(Knobs))

# modules whose import registers their tasks
_MODULES = ["locations", "narratives", "relations", "categories"]


def register(task: Task, knobs: Collection[str]) -> Callable[[StoryFn], StoryFn]:
    """Register `task`'s story function with the knobs it reads (each a field of Knobs)."""
    unknown = set(knobs) - set(KNOB_NAMES)
    if unknown:  # a misspelt declaration would refuse a knob the task reads
        raise ValueError(f"task {task}: {', '.join(sorted(unknown))}: not a field of Knobs ({', '.join(KNOB_NAMES)})")

    def wrap(fn: StoryFn) -> StoryFn:
        GENERATORS[task] = fn
        HONOURS[task] = tuple(k for k in KNOB_NAMES if k in knobs)
        return fn
    return wrap


def _title(task: Task) -> str:
    """'task 1 (single supporting fact)', 'task chain'."""
    return f"task {task}" if task == CHAIN else f"task {task} ({TASK_NAMES[int(task)].replace('-', ' ')})"


def _spans(tasks: list[Task], sep: str = ", ") -> str:
    """'1-18, 20, chain': runs of consecutive task numbers as ranges (sep ',' gives a --task spec)."""
    numbers, runs = sorted(int(t) for t in tasks if t != CHAIN), []  # runs: [first, last]
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    words = [str(a) if a == b else f"{a}{sep}{b}" if b == a + 1 else f"{a}-{b}" for a, b in runs]
    return sep.join(words + [CHAIN] * (CHAIN in tasks))


def unread_knobs(tasks: list[Task], knobs: Knobs, flag: str = "") -> None:
    """KnobError for the first knob given that one of `tasks` does not read, naming the tasks that
    ignore it; `flag` ('--') spells the knobs as the command line does."""
    _load()
    for name in knobs.given():
        deaf = [t for t in tasks if t in HONOURS and name not in HONOURS[t]]
        if len(deaf) == 1:
            own = ", ".join(flag + k for k in HONOURS[deaf[0]])
            raise KnobError(f"{flag}{name}: {_title(deaf[0])} takes no {flag}{name}; "
                            f"its knob{'s are' if ',' in own else ' is'} {own}")
        if deaf:
            takers = [t for t in available_tasks() if name in HONOURS[t]]
            raise KnobError(f"{flag}{name}: tasks {_and(_spans(deaf))} take no {flag}{name}, only "
                            f"{_and(_spans(takers))} {'does' if len(takers) == 1 else 'do'}; drop {flag}{name}, "
                            f"or give it in a run of its own with --task {_spans(takers, ',')}")


def _and(words: str) -> str:
    """'1, 2, chain' -> '1, 2 and chain'."""
    head, _, last = words.rpartition(", ")
    return f"{head} and {last}" if head else last


def _load() -> None:
    for name in _MODULES:
        importlib.import_module(f"memnet.generator.{name}")


def _truncate(story: Story, max_questions: int) -> Story:
    """Keep the story up to its max_questions-th question."""
    lines, seen = [], 0
    for line in story.lines:
        if seen == max_questions:
            break
        lines.append(line)
        seen += line.is_question
    return Story(lines)


def stories(task: Task, size: int, seed: int, split: str = "train", knobs: Knobs = Knobs()) -> Iterator[Story]:
    """`size` questions of `task`, as whole stories (the last one cut after its size-th
    question), told one at a time: a dataset of any size is never held in memory."""
    _load()
    if task not in GENERATORS:
        raise KeyError(f"no generator for task {task!r}")
    unread_knobs([task], knobs)
    rng = random.Random(f"memnet/{task}/{split}/{seed}")  # str seeds hash the same on every machine
    count = 0
    while count < size:
        try:
            story = _truncate(GENERATORS[task](rng, knobs), size - count)
        except KnobError as e:
            raise KnobError(f"task {task}: {e}") from None
        n = len(story.questions)
        if n:
            yield story
            count += n


def generate(task: Task, size: int, seed: int, split: str = "train", knobs: Knobs = Knobs()) -> list[Story]:
    """`stories` as a list."""
    return list(stories(task, size, seed, split, knobs))


def check(task: Task, knobs: Knobs) -> None:
    """KnobError now if `task` cannot be told with `knobs`: one story is told and thrown away,
    so a bad knob stops `write_dataset` over many tasks before any file is written."""
    generate(task, 1, seed=0, split="check", knobs=knobs)


def write_dataset(out: str | Path, task: Task, train: int, test: int, seed: int,
                  knobs: Knobs = Knobs(), valid: int = 0) -> list[Path]:
    """Write the task's split files with official names into `out`, story by story, each
    through a temporary file renamed when complete; returns their paths."""
    paths = []
    for split, size in (("train", train), ("valid", valid), ("test", test)):
        if size > 0:
            path = Path(out) / task_filename(task, split)
            write_file(path, stories(task, size, seed, split, knobs), space_before_tab(task))
            paths.append(path)
    return paths


def available_tasks() -> list[Task]:
    _load()
    return [t for t in [*range(1, 21), CHAIN] if t in GENERATORS]


__all__ = ["Knobs", "KnobError", "knob", "GENERATORS", "HONOURS", "KNOB_NAMES", "register", "unread_knobs", "stories", "generate", "check", "write_dataset",
           "available_tasks", "Line", "Story"]
