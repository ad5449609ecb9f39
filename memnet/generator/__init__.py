"""The story generator: every bAbI task (and memnet's chain family) from a simulated world.

Each task module registers a function ``story(rng, knobs) -> Story`` that builds one story
from its own small world simulation, using only the `random.Random` it is given. The
dataset is then a pure function of (task, split, size, seed): the same arguments give
byte-identical files on any machine, and train and test draw from disjoint seed streams.
"""
from __future__ import annotations

import importlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from memnet.babi import CHAIN, Line, Story, Task, space_before_tab, task_filename, write_file
from memnet.errors import MemnetError


class KnobError(MemnetError):
    """A knob outside what a task can tell a story with: 'actors: expected 1 to 4, found 9'."""


KNOB_MAX = 1000


@dataclass(frozen=True)
class Knobs:
    """Optional changes to a task's official setting; None keeps the official default.

    Each task documents which knobs it honours (see its module).
    """

    questions: int | None = None  # questions per story
    length: int | None = None  # story length: facts per story, or facts between questions
    actors: int | None = None  # number of actors / entities in the world
    distractors: int | None = None  # irrelevant sentences mixed in
    hops: int = 4  # chain family: questions need 1..hops hops

    def __post_init__(self):
        # 0 must not read as "the official setting" (the tasks write `knobs.questions or 5`), and
        # a story is told whole before it is cut to size: the bound keeps one story small
        for name, lo in [("questions", 1), ("length", 1), ("actors", 1), ("distractors", 0), ("hops", 1)]:
            value = getattr(self, name)
            if value is not None and not lo <= value <= KNOB_MAX:
                raise KnobError(f"{name}: expected {lo} to {KNOB_MAX}, found {value}")


def knob(value: int | None, default: int, lo: int, hi: int | None, name: str) -> int:
    """`value` (None: the task's `default`) checked against the task's range lo..hi (hi None: no bound)."""
    n = default if value is None else value
    if n < lo or (hi is not None and n > hi):
        raise KnobError(f"{name}: expected {lo} to {hi} for this task, found {n}" if hi is not None
                        else f"{name}: expected at least {lo} for this task, found {n}")
    return n

StoryFn = Callable[[random.Random, Knobs], Story]
GENERATORS: dict[Task, StoryFn] = {}

# modules whose import registers their tasks
_MODULES = ["locations", "narratives", "relations", "categories"]


def register(task: Task) -> Callable[[StoryFn], StoryFn]:
    def wrap(fn: StoryFn) -> StoryFn:
        GENERATORS[task] = fn
        return fn
    return wrap


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


__all__ = ["Knobs", "KnobError", "knob", "GENERATORS", "register", "stories", "generate", "check", "write_dataset",
           "available_tasks", "Line", "Story"]
