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
from typing import Callable

from memnet.babi import CHAIN, Line, Story, Task, space_before_tab, task_filename, write_file


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


def generate(task: Task, size: int, seed: int, split: str = "train", knobs: Knobs = Knobs()) -> list[Story]:
    """`size` questions of `task`, as whole stories (the last one cut after its size-th question)."""
    _load()
    if task not in GENERATORS:
        raise KeyError(f"no generator for task {task!r}")
    rng = random.Random(f"memnet/{task}/{split}/{seed}")  # str seeds hash the same on every machine
    stories, count = [], 0
    while count < size:
        story = _truncate(GENERATORS[task](rng, knobs), size - count)
        n = len(story.questions)
        if n:
            stories.append(story)
            count += n
    return stories


def write_dataset(out: str | Path, task: Task, train: int, test: int, seed: int,
                  knobs: Knobs = Knobs(), valid: int = 0) -> list[Path]:
    """Write the task's split files with official names into `out`; returns their paths."""
    paths = []
    for split, size in (("train", train), ("valid", valid), ("test", test)):
        if size > 0:
            path = Path(out) / task_filename(task, split)
            write_file(path, generate(task, size, seed, split, knobs), space_before_tab(task))
            paths.append(path)
    return paths


def available_tasks() -> list[Task]:
    _load()
    return [t for t in [*range(1, 21), CHAIN] if t in GENERATORS]


__all__ = ["Knobs", "GENERATORS", "register", "generate", "write_dataset", "available_tasks", "Line", "Story"]
