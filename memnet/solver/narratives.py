"""Solvers for tasks 5, 11, 12, 13 and 14, reading only the story text.

  5   the latest give that fits the question answers it; support: that give.
  11  "he"/"she" is the latest actor of that gender; support: the naming fact, then the
      pronoun's fact (story order).
  12  the latest fact naming the actor; support: that fact.
  13  "they" are the two actors of the sentence before; support as in 11.
  14  the actor's latest time at the asked place, and the time of day before it;
      support: the fact at the place, then the fact before it in time.
"""
from __future__ import annotations

import re
from typing import Sequence

from memnet.babi import Line
from memnet.solver import Solution, register

_MOVE = r"(?:went back|went|moved|journeyed|travelled) to the (\w+)"
_FEMALE = {"Mary", "Sandra", "Julie"}


def _match(pattern: str, text: str) -> re.Match:
    m = re.fullmatch(pattern, text.strip())
    if not m:
        raise ValueError(f"unexpected sentence: {text!r}")
    return m


# ---------------------------------------------------------------------------- task 5

_GIVE = re.compile(r"(\w+) (?:gave|passed|handed) the (\w+) to (\w+)\.")
_QUESTIONS = [  # question pattern -> (giver, object, taker) slots it names, slot it asks
    (r"What did (\w+) give to (\w+)\?", (0, 2), 1),
    (r"Who received the (\w+)\?", (1,), 2),
    (r"Who gave the (\w+)\?", (1,), 0),
    (r"Who did (\w+) give the (\w+) to\?", (0, 1), 2),
    (r"Who gave the (\w+) to (\w+)\?", (1, 2), 0),
]


@register(5)
def three_arg_relations(facts: Sequence[Line], question: str) -> Solution:
    gives = [(line.id, m.groups()) for line in facts if (m := _GIVE.fullmatch(line.text.strip()))]
    for pattern, named, asked in _QUESTIONS:
        m = re.fullmatch(pattern, question.strip())
        if m:
            for i, give in reversed(gives):
                if all(give[slot] == word for slot, word in zip(named, m.groups())):
                    return Solution(give[asked], (i,))
            raise ValueError(f"nothing given fits {question!r}")
    raise ValueError(f"unexpected question: {question!r}")


# ---------------------------------------------------------------------------- tasks 11-13


def _whereabouts(facts: Sequence[Line]) -> dict[str, tuple[str, tuple[int, ...]]]:
    """actor -> (place, support) after the facts, resolving he, she and they."""
    state: dict[str, tuple[str, tuple[int, ...]]] = {}
    named: list[tuple[str, int]] = []  # (actor, id of the fact that named them), latest last
    previous: tuple[list[str], int] = ([], 0)  # actors named by the sentence before, its id
    for line in facts:
        m = _match(rf"(?:(?:After that|Afterwards|Following that|Then) )?(\w+(?: and \w+)?) {_MOVE}\.", line.text)
        who, place = m.group(1), m.group(2)
        if who in ("he", "she"):
            found = [(a, i) for a, i in reversed(named) if (a in _FEMALE) == (who == "she")]
            if not found:
                raise ValueError(f"line {line.id}: {who!r} with no one named before it")
            actor, first = found[0]
            actors, support = [actor], (first, line.id)
        elif who == "they":
            actors, support = previous[0], (previous[1], line.id)
        else:
            actors, support = who.split(" and "), (line.id,)
            named += [(a, line.id) for a in actors]
            previous = (actors, line.id)
        for a in actors:
            state[a] = (place, support)
    return state


def _where_is(facts: Sequence[Line], question: str) -> Solution:
    actor = _match(r"Where is (\w+)\?", question).group(1)
    state = _whereabouts(facts)
    if actor not in state:
        raise ValueError(f"no fact before the question tells where {actor} is")
    place, support = state[actor]
    return Solution(place, support)


for _task in (11, 12, 13):
    register(_task)(_where_is)


# ---------------------------------------------------------------------------- task 14

_TIMES = ["yesterday", "this morning", "this afternoon", "this evening"]
_WHEN = "|".join(t.capitalize() for t in _TIMES) + "|" + "|".join(_TIMES)


@register(14)
def time_reasoning(facts: Sequence[Line], question: str) -> Solution:
    actor, place = _match(r"Where was (\w+) before the (\w+)\?", question).groups()
    day: dict[int, tuple[str, int]] = {}  # time of day -> (place, fact id) for the actor
    for line in facts:
        m = _match(rf"(?:({_WHEN}) )?(\w+) {_MOVE}(?: ({_WHEN}))?\.", line.text)
        if m.group(2) == actor:
            if not (m.group(1) or m.group(4)):
                raise ValueError(f"line {line.id}: a move without a time of day")
            day[_TIMES.index((m.group(1) or m.group(4)).lower())] = (m.group(3), line.id)
    # a place visited twice is asked about at its latest visit, as the official files do
    time = max(k for k, (p, _) in day.items() if p == place)
    if time - 1 not in day:
        raise ValueError(f"no fact tells where {actor} was before the {place}")
    before, i = day[time - 1]
    return Solution(before, (day[time][1], i))
