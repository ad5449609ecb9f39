"""Solvers for two-arg relations (4), positional (17), size (18) and path-finding (19) reasoning.

They read only the fact sentences.

Tasks 4, 17 and 19 place things on a grid: each fact "The A is <way> (of) the B." is an edge
A-B carrying the step from B to A. The answer follows the chain of facts between the two
asked things (the shortest one; the facts form a tree in all three tasks), and that chain,
walked from the question's first thing, is the support:
  4:  the room whose step from the asked room is exactly the asked way;
  17: yes when the chain's total step points strictly the asked way (shapes on one row are
      neither above nor below each other);
  19: the chain's steps as letters ("s,e").

Task 18 orders objects by size: "The B fits inside the A." and "The A is bigger than the B."
both say A > B. "Is the A bigger than the B?" and "Does the B fit in the A?" both claim A > B;
the answer is whether the told facts imply it. Support is a chain from A to B, and, as in the
official files, a chain of two facts is cited even when one fact links A and B directly.
"""
from __future__ import annotations

import re
from collections import defaultdict, deque
from typing import Sequence

from memnet.babi import Line
from memnet.solver import Solution, register

STEPS = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0),
         "above": (0, 1), "below": (0, -1), "to the right of": (1, 0), "to the left of": (-1, 0)}
LETTER = {(0, 1): "n", (0, -1): "s", (1, 0): "e", (-1, 0): "w"}
NOT_FOUND = Solution("unknown", ())  # the facts say nothing that answers the question

_WAY = "|".join(sorted(STEPS, key=len, reverse=True))
_PLACED = re.compile(rf"The (.+) is ({_WAY})(?: of)? the (.+)\.")


class _Grid:
    """Things linked by facts; each edge carries the step from one thing to the other."""

    def __init__(self, facts: Sequence[Line]):
        self.edges: dict[str, list[tuple[str, tuple[int, int], int]]] = defaultdict(list)
        for fact in facts:
            m = _PLACED.fullmatch(fact.text)
            if m:
                a, way, b = m.groups()
                dx, dy = STEPS[way]
                self.edges[b].append((a, (dx, dy), fact.id))
                self.edges[a].append((b, (-dx, -dy), fact.id))

    def chain(self, x: str, y: str) -> list[tuple[tuple[int, int], int]] | None:
        """The shortest chain of facts from x to y: (step, fact id) pairs, or None."""
        back: dict[str, tuple[str, tuple[int, int], int] | None] = {x: None}
        todo = deque([x])
        while todo:
            u = todo.popleft()
            for v, step, fid in self.edges[u]:
                if v not in back:
                    back[v] = (u, step, fid)
                    todo.append(v)
        if y not in back or x == y:
            return None
        out = []
        while back[y] is not None:
            u, step, fid = back[y]
            out.append((step, fid))
            y = u
        return out[::-1]


def _total(chain: list[tuple[tuple[int, int], int]]) -> tuple[int, int]:
    return sum(s[0] for s, _ in chain), sum(s[1] for s, _ in chain)


# ---------------------------------------------------------------------------- task 4

_WHAT_IS_WAY_OF = re.compile(r"What is (\w+) of the (\w+)\?")  # What is north of the kitchen?
_WHAT_IS_X_WAY_OF = re.compile(r"What is the (\w+) (\w+) of\?")  # What is the garden east of?


@register(4)
def two_arg_relations(facts: Sequence[Line], question: str) -> Solution:
    if m := _WHAT_IS_WAY_OF.fullmatch(question):
        way, here = m.groups()
        want = STEPS[way]
    elif m := _WHAT_IS_X_WAY_OF.fullmatch(question):
        here, way = m.groups()
        want = tuple(-d for d in STEPS[way])
    else:
        raise ValueError(f"task 4: unexpected question {question!r}")
    grid = _Grid(facts)
    found = []
    for room in list(grid.edges):
        chain = grid.chain(here, room)
        if chain and _total(chain) == want:
            found.append((room, tuple(fid for _, fid in chain)))
    if not found:
        return NOT_FOUND
    return Solution("|".join(sorted(r for r, _ in found)), found[0][1])  # '|': two rooms fit


# ---------------------------------------------------------------------------- task 17

_IS_PLACED = re.compile(rf"Is the (.+) ({_WAY}) the (.+)\?")


@register(17)
def positional_reasoning(facts: Sequence[Line], question: str) -> Solution:
    m = _IS_PLACED.fullmatch(question)
    if not m:
        raise ValueError(f"task 17: unexpected question {question!r}")
    x, way, y = m.groups()
    chain = _Grid(facts).chain(x, y)
    if chain is None:
        return NOT_FOUND
    dx, dy = _total(chain)  # walked from x to y: y's position minus x's
    ux, uy = STEPS[way]
    yes = dx * ux + dy * uy < 0
    return Solution("yes" if yes else "no", tuple(fid for _, fid in chain))


# ---------------------------------------------------------------------------- task 19

_HOW = re.compile(r"How do you go from the (\w+) to the (\w+)\?")


@register(19)
def path_finding(facts: Sequence[Line], question: str) -> Solution:
    m = _HOW.fullmatch(question)
    if not m:
        raise ValueError(f"task 19: unexpected question {question!r}")
    chain = _Grid(facts).chain(*m.groups())
    if chain is None:
        return NOT_FOUND
    return Solution(",".join(LETTER[step] for step, _ in chain), tuple(fid for _, fid in chain))


# ---------------------------------------------------------------------------- task 18

_FITS = re.compile(r"The (.+) fits inside the (.+)\.")
_BIGGER = re.compile(r"The (.+) is bigger than the (.+)\.")
_IS_BIGGER = re.compile(r"Is the (.+) bigger than the (.+)\?")
_FIT_IN = re.compile(r"Does the (.+) fit in the (.+)\?")


def _bigger_facts(facts: Sequence[Line]) -> dict[tuple[str, str], list[int]]:
    """(bigger, smaller) -> ids of the facts that say so, in story order."""
    told: dict[tuple[str, str], list[int]] = defaultdict(list)
    for fact in facts:
        if m := _FITS.fullmatch(fact.text):
            told[m.group(2), m.group(1)].append(fact.id)
        elif m := _BIGGER.fullmatch(fact.text):
            told[m.group(1), m.group(2)].append(fact.id)
    return told


def _size_chain(told: dict[tuple[str, str], list[int]], hi: str, lo: str, from_hi: bool) -> tuple[int, ...] | None:
    """Fact ids of a chain hi > ... > lo, walked from hi (from_hi) or from lo; None if none.

    A two-fact chain is cited whenever there is one. Where the official files tell a relation
    twice, or link the pair through two middles, their choice is not consistent; citing the
    last mention of the first fact and the first mention of the second, through the middle
    whose second fact is earliest, agrees with most of it.
    """
    twos = [(told[hi, m], told[m, lo]) for (a, m) in told if a == hi and (m, lo) in told]
    if twos:
        walks = [(upper, lower) if from_hi else (lower, upper) for upper, lower in twos]
        return min(((max(first), min(second)) for first, second in walks), key=lambda ids: ids[1])
    chains: dict[str, tuple[int, ...]] = {hi: ()}
    todo = deque([hi])
    while todo:
        u = todo.popleft()
        for (a, b), ids in told.items():
            if a == u and b not in chains:
                chains[b] = chains[u] + (ids[0],)
                todo.append(b)
    if lo not in chains or lo == hi:
        return None
    return chains[lo] if from_hi else chains[lo][::-1]


@register(18)
def size_reasoning(facts: Sequence[Line], question: str) -> Solution:
    if m := _IS_BIGGER.fullmatch(question):
        a, b = m.groups()
    elif m := _FIT_IN.fullmatch(question):
        b, a = m.groups()
    else:
        raise ValueError(f"task 18: unexpected question {question!r}")
    told = _bigger_facts(facts)
    if (chain := _size_chain(told, a, b, from_hi=True)) is not None:
        return Solution("yes", chain)
    if (chain := _size_chain(told, b, a, from_hi=False)) is not None:
        return Solution("no", chain)
    return NOT_FOUND
