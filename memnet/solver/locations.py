"""Solver for the people-moving-things tasks 1, 2, 3, 6, 7, 8, 9 and 10.

Each fact is parsed into an event (a move, a pick-up, a drop, a give, a negated or an
uncertain location), then the question is answered from those events alone:

    1  Where is Mary?                      the actor's last location fact
    2  Where is the football?              the object's last fact, then its holder's location
    3  Where was the football before the garden?
                                           the object's last fact, the move that brought it to
                                           the garden, the move that brought it where it was before;
                                           its latest visit to the garden, if it was there more
                                           than once (how the official files read it)
    6  Is Mary in the office?              yes/no from the actor's last location fact
    7  How many objects is Mary carrying?  none/one/two/...; every object fact of hers, story order
    8  What is Mary carrying?              objects in the order she first took them; her facts
                                           grouped by object in that order (the official convention)
    9  Is Mary in the office?              also 'is not' / 'is no longer' facts
    10 Is Fred in the school?              also 'is either in the A or the B' facts: maybe
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from memnet.babi import Line
from memnet.solver import Solution, register

_FACTS = [
    ("at", re.compile(r"(\w+) (?:moved|went|went back|journeyed|travelled) to the (\w+)\.")),
    ("at", re.compile(r"(\w+) is in the (\w+)\.")),
    ("not", re.compile(r"(\w+) is (?:not|no longer) in the (\w+)\.")),
    ("either", re.compile(r"(\w+) is either in the (\w+) or the (\w+)\.")),
    ("get", re.compile(r"(\w+) (?:got|took|grabbed|picked up) the (\w+)(?: there)?\.")),
    ("drop", re.compile(r"(\w+) (?:dropped|left|discarded|put down) the (\w+)(?: there)?\.")),
    ("give", re.compile(r"(\w+) (?:gave|passed|handed) the (\w+) to (\w+)\.")),
]
NUMBERS = ["none", "one", "two", "three", "four", "five", "six"]


@dataclass(frozen=True)
class Event:
    kind: str  # at, not, either, get, drop, give
    id: int
    actor: str
    args: tuple[str, ...]  # the place(s); or the object (and the receiver of a give)


def parse(line: Line) -> Event:
    for kind, pattern in _FACTS:
        m = pattern.fullmatch(line.text)
        if m:
            return Event(kind, line.id, m.group(1), m.groups()[1:])
    raise ValueError(f"not a location fact: {line.text!r}")


def _ask(pattern: str, question: str) -> tuple[str, ...]:
    m = re.fullmatch(pattern, question)
    if not m:
        raise ValueError(f"unexpected question {question!r}")
    return m.groups()


def _last_place(events: Sequence[Event], actor: str) -> Event:
    """The actor's latest fact that says where they are, or are not, or may be."""
    e = next((e for e in reversed(events) if e.actor == actor and e.kind in ("at", "not", "either")), None)
    if e is None:
        raise ValueError(f"no fact before the question tells where {actor} is")
    return e


def _holder(e: Event) -> str | None:
    """Who holds the object after event e about it: nobody after a drop."""
    return {"get": e.actor, "give": e.args[-1]}.get(e.kind)


def _object_events(events: Sequence[Event], obj: str) -> list[Event]:
    return [e for e in events if e.kind in ("get", "drop", "give") and e.args[0] == obj]


def _where_object(events: Sequence[Event], obj: str) -> tuple[str, tuple[int, ...]]:
    """Task 2: the object's last fact, then its holder's location (then, or at the drop)."""
    if not (moves := _object_events(events, obj)):
        raise ValueError(f"no fact before the question mentions the {obj}")
    last = moves[-1]
    holder = _holder(last) or last.actor
    before = events if _holder(last) else [e for e in events if e.id < last.id]
    place = _last_place(before, holder)
    return place.args[0], (last.id, place.id)


def _object_trail(events: Sequence[Event], obj: str) -> list[tuple[str, int]]:
    """Task 3: the places the object has been, each with the move that brought it there."""
    trail: list[tuple[str, int]] = []
    where: dict[str, tuple[str, int]] = {}  # actor -> (place, fact id)
    holder = None
    for e in events:
        if e.kind == "at":
            where[e.actor] = (e.args[0], e.id)
            if e.actor == holder and (not trail or trail[-1][0] != e.args[0]):
                trail.append(where[e.actor])
        elif e.args[0] == obj:
            holder = _holder(e)
            if holder in where and (not trail or trail[-1][0] != where[holder][0]):
                trail.append(where[holder])
    return trail


def _carrying(events: Sequence[Event], actor: str) -> tuple[list[str], list[int]]:
    """Tasks 7 and 8: what the actor holds, and their object facts grouped by object,
    objects in the order the actor first handled them."""
    held: list[str] = []
    facts: dict[str, list[int]] = {}
    for e in events:
        if e.kind not in ("get", "drop", "give") or actor not in (e.actor, _holder(e)):
            continue
        obj = e.args[0]
        facts.setdefault(obj, []).append(e.id)
        if _holder(e) == actor:
            held.append(obj)
        elif obj in held:
            held.remove(obj)
    held.sort(key=list(facts).index)
    return held, [i for ids in facts.values() for i in ids]


@register(1)
def where_is_actor(facts: Sequence[Line], question: str) -> Solution:
    (actor,) = _ask(r"Where is (\w+)\?", question)
    e = _last_place([parse(f) for f in facts], actor)
    return Solution(e.args[0], (e.id,))


@register(2)
def where_is_object(facts: Sequence[Line], question: str) -> Solution:
    (obj,) = _ask(r"Where is the (\w+)\?", question)
    place, support = _where_object([parse(f) for f in facts], obj)
    return Solution(place, support)


@register(3)
def where_was_object(facts: Sequence[Line], question: str) -> Solution:
    obj, place = _ask(r"Where was the (\w+) before the (\w+)\?", question)
    events = [parse(f) for f in facts]
    trail = _object_trail(events, obj)
    # the latest time the object came to `place`: the official files read it so
    i = max(i for i in range(1, len(trail)) if trail[i][0] == place)
    last = _object_events(events, obj)[-1]
    return Solution(trail[i - 1][0], (last.id, trail[i][1], trail[i - 1][1]))


@register(6)
@register(9)
@register(10)
def is_actor_in(facts: Sequence[Line], question: str) -> Solution:
    actor, place = _ask(r"Is (\w+) in the (\w+)\?", question)
    e = _last_place([parse(f) for f in facts], actor)
    if e.kind == "either":
        answer = "maybe" if place in e.args else "no"
    elif e.kind == "not" and place == e.args[0]:
        answer = "no"
    elif e.kind == "not":
        raise ValueError(f"{question!r}: only known not to be in the {e.args[0]}")
    else:
        answer = "yes" if place == e.args[0] else "no"
    return Solution(answer, (e.id,))


@register(7)
def how_many(facts: Sequence[Line], question: str) -> Solution:
    (actor,) = _ask(r"How many objects is (\w+) carrying\?", question)
    held, support = _carrying([parse(f) for f in facts], actor)
    return Solution(NUMBERS[len(held)], tuple(sorted(support)))


@register(8)
def what_carrying(facts: Sequence[Line], question: str) -> Solution:
    (actor,) = _ask(r"What is (\w+) carrying\?", question)
    held, support = _carrying([parse(f) for f in facts], actor)
    return Solution(",".join(held) or "nothing", tuple(support))
