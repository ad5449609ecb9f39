"""A solver that reads only story text: recomputes each answer and its supporting facts.

It never sees the generator's internal state, so running it over generated files checks
the generator, and running it over the official files finds where they disagree with
their own task definitions. Each task module registers ``solve(facts, question) -> Solution``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from memnet.babi import CHAIN, Line, Story, Task


@dataclass(frozen=True)
class Solution:
    answer: str  # as written in the file: several words joined by commas
    support: tuple[int, ...]  # supporting fact ids in the official order for the task (reasoning order)


SolveFn = Callable[[Sequence[Line], str], Solution]
SOLVERS: dict[Task, SolveFn] = {}
# tasks whose files pick one of several answers the facts allow by a convention of their own
# (qa16): a solver here answers with every answer the facts allow, joined by '|'
ALLOWING: dict[Task, SolveFn] = {}
_MODULES = ["locations", "narratives", "relations", "categories"]


def register(task: Task, allowing: bool = False) -> Callable[[SolveFn], SolveFn]:
    def wrap(fn: SolveFn) -> SolveFn:
        (ALLOWING if allowing else SOLVERS)[task] = fn
        return fn
    return wrap


def _load() -> None:
    for name in _MODULES:
        importlib.import_module(f"memnet.solver.{name}")


def solve(task: Task, facts: Sequence[Line], question: str) -> Solution:
    _load()
    return SOLVERS[task](facts, question)


@dataclass(frozen=True)
class Disagreement:
    story: int  # index of the story in its file, from 0
    line: int  # the question's line id
    question: str
    expected: Solution  # what the file says
    found: Solution  # what the solver computed

    @property
    def kind(self) -> str:
        return "answer" if self.expected.answer != self.found.answer else "support"


def check(task: Task, stories: Iterable[Story]) -> list[Disagreement]:
    """Every question whose answer or supporting facts differ from the solver's."""
    _load()
    fn = SOLVERS[task]
    out = []
    for i, story in enumerate(stories):
        facts: list[Line] = []
        for line in story.lines:
            if not line.is_question:
                facts.append(line)
                continue
            try:
                found = fn(facts, line.text)
            except ValueError as e:  # a sentence or question outside the task's language
                found = Solution(f"<unreadable: {e}>", ())
            expected = Solution(line.answer, line.support)
            if found != expected:
                out.append(Disagreement(i, line.id, line.text, expected, found))
    return out


def available_tasks() -> list[Task]:
    _load()
    return [t for t in [*range(1, 21), CHAIN] if t in SOLVERS]


def answers(task: Task, facts: Sequence[Line], question: str) -> list[str]:
    """Every answer the facts allow: several where the question is ambiguous (the solver joins
    them with '|'), also where the task's convention picks one of them (qa16); [] where no
    solver covers the task or it cannot read the story."""
    _load()
    fn = ALLOWING.get(task, SOLVERS.get(task))
    if fn is None:
        return []
    try:
        return fn(facts, question).answer.split("|")
    except ValueError:
        return []
