"""Solvers for deduction (15), induction (16), agents' motivations (20) and chain.

They read only the fact sentences. Where the facts allow two different answers the solver
answers with all of them, sorted and joined by '|' ('gray|white'): no file answer looks like
that, so `check` reports such a question instead of agreeing with an arbitrary choice.

Colour questions (16 and chain) take the shortest derivation of the asked name's colour:
its own colour fact (1 fact); its species' colour rule (2); another member of its species
and that member's colour (3, induction); or a link up the class hierarchy ("Swans are
wumpuses.") followed by any of these for the class. Among equally short derivations the one
with the latest facts is preferred (qa16's partner is the one whose species fact is latest);
where they disagree, qa16 answers by that convention (the official files' own), chain with all.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Sequence

from memnet.babi import CHAIN, Line
from memnet.solver import Solution, register

COLOURS = {"yellow", "green", "white", "gray"}
SINGULAR = {"mice": "mouse", "wolves": "wolf", "sheep": "sheep"}

# task 20: where each motivation sends an agent
PLACE = {"tired": "bedroom", "bored": "garden", "thirsty": "kitchen", "hungry": "kitchen"}


def singular(word: str) -> str:
    if word in SINGULAR:
        return SINGULAR[word]
    return word[:-2] if word.endswith("ses") else word[:-1]


def _answer(candidates: list[tuple[str, tuple[int, ...]]]) -> Solution:
    """The preferred candidate (they come best first), or all answers when they disagree."""
    answers = sorted({a for a, _ in candidates})
    return Solution("|".join(answers), candidates[0][1])


NOT_FOUND = Solution("unknown", ())  # the facts say nothing that answers the question


_IS_A = re.compile(r"(\w+) is an? (\w+)\.")
_IS = re.compile(r"(\w+) is (\w+)\.")
_ARE = re.compile(r"(\w+) are (\w+)\.")
_AFRAID = re.compile(r"(\w+) are afraid of (\w+)\.")


# ---------------------------------------------------------------------------- colours (16, chain)

class _Kinds:
    """Who is what, from the facts: memberships, colours, class rules and class links."""

    def __init__(self, facts: Sequence[Line]):
        self.isa = defaultdict(list)  # name -> [(class, id)]
        self.members = defaultdict(list)  # class -> [(name, id)]
        self.colour = defaultdict(list)  # name -> [(colour, id)]
        self.rule = defaultdict(list)  # class -> [(colour, id)]
        self.link = defaultdict(list)  # class -> [(superclass, id)]
        for f in facts:
            if m := _IS_A.fullmatch(f.text):
                self.isa[m[1]].append((m[2], f.id))
                self.members[m[2]].append((m[1], f.id))
            elif (m := _IS.fullmatch(f.text)) and m[2] in COLOURS:
                self.colour[m[1]].append((m[2], f.id))
            elif m := _ARE.fullmatch(f.text):
                kind = singular(m[1].lower())
                if m[2] in COLOURS:
                    self.rule[kind].append((m[2], f.id))
                else:
                    self.link[kind].append((singular(m[2]), f.id))

    def of_class(self, kind: str, x: str, seen: frozenset[str]) -> list[tuple[str, tuple[int, ...]]]:
        """Every derivation of the colour shared by members of `kind`, other than from x itself."""
        out = [(c, (i,)) for c, i in self.rule[kind]]
        out += [(c, (i, j)) for y, i in self.members[kind] if y != x for c, j in self.colour[y]]
        for up, i in self.link[kind]:
            if up not in seen:
                out += [(c, (i, *ids)) for c, ids in self.of_class(up, x, seen | {up})]
        return out

    def of_name(self, x: str) -> list[tuple[str, tuple[int, ...]]]:
        out = [(c, (i,)) for c, i in self.colour[x]]
        for kind, i in self.isa[x]:
            out += [(c, (i, *ids)) for c, ids in self.of_class(kind, x, frozenset({kind}))]
        return out


def _shortest(facts: Sequence[Line], question: str) -> list[tuple[str, tuple[int, ...]]]:
    """The shortest derivations of the asked name's colour, those with the latest facts first."""
    m = re.fullmatch(r"What color is (\w+)\?", question)
    found = _Kinds(facts).of_name(m[1]) if m else []
    if not found:
        return []
    depth = min(len(ids) for _, ids in found)
    shortest = [d for d in found if len(d[1]) == depth]
    shortest.sort(key=lambda d: d[1][1:], reverse=True)  # latest facts beyond the name's own first
    return shortest


@register(CHAIN)
@register(16, allowing=True)
def solve_colour(facts: Sequence[Line], question: str) -> Solution:
    """Every colour the shortest derivations give: chain stories never allow two, and `check`
    reports a chain question that does."""
    shortest = _shortest(facts, question)
    return _answer(shortest) if shortest else NOT_FOUND


@register(16)
def solve_induction(facts: Sequence[Line], question: str) -> Solution:
    """Where the animals of the asked one's kind differ in colour, qa16 answers with the colour
    of the one whose kind was told last: all 150 such official questions do (and 139 of them
    also with the latest colour told), and so does the generator."""
    shortest = _shortest(facts, question)
    return Solution(*shortest[0]) if shortest else NOT_FOUND


# ---------------------------------------------------------------------------- task 15

@register(15)
def solve_deduction(facts: Sequence[Line], question: str) -> Solution:
    """Support = (the name's species fact, that species' rule)."""
    m = re.fullmatch(r"What is (\w+) afraid of\?", question)
    if not m:
        return NOT_FOUND
    kinds = [(f.id, k[2]) for f in facts if (k := _IS_A.fullmatch(f.text)) and k[1].lower() == m[1].lower()]
    if not kinds:
        return NOT_FOUND
    i, kind = kinds[-1]  # the latest word on what the animal is
    rules = [(singular(r[2]), (i, f.id)) for f in reversed(facts)
             if (r := _AFRAID.fullmatch(f.text)) and singular(r[1].lower()) == kind]
    return _answer(rules) if rules else NOT_FOUND


# ---------------------------------------------------------------------------- task 20

@register(20)
def solve_motivation(facts: Sequence[Line], question: str) -> Solution:
    """Every question's answer follows from the agent's latest motivation fact, its support."""
    m = re.fullmatch(r"(?:Where will|Why did) (\w+) (?:go|get the \w+|go to the \w+)\?", question)
    if not m:
        return NOT_FOUND
    motives = [(f.id, k[2]) for f in facts
               if (k := _IS.fullmatch(f.text)) and k[1].lower() == m[1] and k[2] in PLACE]
    if not motives:
        return NOT_FOUND
    i, motive = motives[-1]
    return Solution(PLACE[motive] if question.startswith("Where") else motive, (i,))
