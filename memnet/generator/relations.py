"""Relations: two-arg relations (4), positional (17), size (18) and path-finding (19) reasoning.

Each story is drawn from a tiny world laid out here: rooms on a grid (4, 19), shapes on a
grid (17), objects ordered by size (18). Every fact is a true relation of that world; each
relation has two surface forms ("A is north of B" / "B is south of A") and the mix of forms
follows the official train files.

Task 4. Three rooms in a line; two facts (in either order) link neighbours. A question picks
one fact "A is D of B" and asks for A: "What is D of the B?" or "What is the B D' of?"
(D' the opposite of D); support = that fact:

    1 The office is north of the kitchen.   2 The garden is south of the kitchen.
    3 What is north of the kitchen?   office   1

Task 17. Three shapes on a grid, each a step (up, down, left, right) from the one before;
two facts link them in that order. Eight questions ask about the two end shapes: the truth
is drawn first, then one of the relations with that truth. Shapes on one row are neither
above nor below each other, so those questions are answered "no". Support = the chain of
facts from the question's first shape to its second.

Task 18. Six objects ordered by size (chocolate < box of chocolates < the four containers
in a random order). Facts state relations between pairs not told before; after five facts,
questions (five, drawn with replacement) ask about pairs linked by exactly one two-fact
chain and by no direct fact; if there is no such pair yet, five more facts come first.
"Is A bigger than B?" and "Does B fit in A?" both claim A > B; support = the chain from A to
B, e.g. "Does the chocolate fit in the box? yes 5 3" with 5 "The chest fits inside the box."
and 3 "The chest is bigger than the chocolate."

Task 19. Rooms on a grid: a two-step path from one room to another, and three decoy rooms
each beside a room of the path. The five facts are shuffled; the question asks for the
path's directions ("s,e"), support = the path's facts in walking order. The facts form a
tree, so the path is unique. Unlike the official files (7% of stories), no two rooms share
a cell; and the shuffle is uniform, where the official path facts lean towards the end.

Knobs honoured (official default in brackets, declared at each @register); the others do
not apply and are refused:
  4:  questions per story [1]; length = facts [2], 2 to 5 (rooms in the line = length + 1)
  17: questions per story [8]; length = facts [2], 2 to 5 (shapes in the chain = length + 1)
  18: questions per story [5]; length = facts told before questions are tried [5], 1 to 7
  19: length = steps of the asked path [2]; distractors = decoy rooms [3]; length + distractors <= 5
"""
from __future__ import annotations

import random

from memnet.babi import Line, Story
from memnet.generator import Knobs, knob, register

ROOMS = ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]
WAYS = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}
SHAPES = ["red square", "yellow square", "blue square", "pink rectangle", "red sphere", "triangle"]
PLACES = {"above": (0, 1), "below": (0, -1), "to the right of": (1, 0), "to the left of": (-1, 0)}
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east",
            "above": "below", "below": "above", "to the right of": "to the left of",
            "to the left of": "to the right of"}
SMALLEST = ["chocolate", "box of chocolates"]  # always the two smallest, as in the official files
CONTAINERS = ["box", "chest", "container", "suitcase"]

Fact = tuple[str, str, str]  # (A, relation, B): "The A is <relation> the B."
Question = tuple[str, str, tuple[int, ...]]  # (text, answer, supporting fact ids)


def _story(facts: list[str], questions: list[Question]) -> Story:
    """Facts numbered from 1, then the questions."""
    lines = [Line(i, text) for i, text in enumerate(facts, start=1)]
    lines += [Line(len(facts) + i, text, answer, support)
              for i, (text, answer, support) in enumerate(questions, start=1)]
    return Story(lines)


def _link(rng: random.Random, near: str, far: str, way: str, p_far: float) -> Fact:
    """A fact saying `far` is `way` of `near`; `far` is its subject with probability p_far."""
    return (far, way, near) if rng.random() < p_far else (near, OPPOSITE[way], far)


def _chain_links(rng: random.Random, items: list[str], ways: list[str], p_outer: float) -> list[Fact]:
    """Facts linking items[i] to items[i + 1] (which is ways[i] of it).

    The item farther from the chain's middle is the subject with probability p_outer.
    """
    mid = (len(items) - 1) / 2
    facts = []
    for i, way in enumerate(ways):
        outer_far = abs(i + 1 - mid) > abs(i - mid) or (abs(i + 1 - mid) == abs(i - mid) and rng.random() < 0.5)
        facts.append(_link(rng, items[i], items[i + 1], way, p_outer if outer_far else 1 - p_outer))
    return facts


def _walk(rng: random.Random, n: int, steps: dict[str, tuple[int, int]]) -> tuple[list[tuple[int, int]], list[str]]:
    """A self-avoiding walk of n steps from (0, 0): the cells visited and the ways taken."""
    cells, ways = [(0, 0)], []
    for _ in range(n):
        x, y = cells[-1]
        free = [w for w, (dx, dy) in steps.items() if (x + dx, y + dy) not in cells]
        way = rng.choice(free)  # never empty: a walk of at most 5 steps cannot trap itself
        cells.append((x + steps[way][0], y + steps[way][1]))
        ways.append(way)
    return cells, ways


# ---------------------------------------------------------------------------- task 4

@register(4, {"questions", "length"})
def two_arg_relations(rng: random.Random, knobs: Knobs) -> Story:
    n = knob(knobs.length, 2, 2, len(ROOMS) - 1, "length")
    rooms = rng.sample(ROOMS, n + 1)
    way = rng.choice(list(WAYS))
    # The official files make the outer room the subject of its fact two times in three.
    facts = _chain_links(rng, rooms, [way] * n, p_outer=2 / 3)
    rng.shuffle(facts)
    questions = []
    for _ in range(knob(knobs.questions, 1, 1, 100, "questions")):
        i = rng.randrange(n)
        a, rel, b = facts[i]
        text = f"What is {rel} of the {b}?" if rng.random() < 0.5 else f"What is the {b} {OPPOSITE[rel]} of?"
        questions.append((text, a, (i + 1,)))
    return _story([f"The {a} is {rel} of the {b}." for a, rel, b in facts], questions)


# ---------------------------------------------------------------------------- task 17

@register(17, {"questions", "length"})
def positional_reasoning(rng: random.Random, knobs: Knobs) -> Story:
    n = knob(knobs.length, 2, 2, len(SHAPES) - 1, "length")
    shapes = rng.sample(SHAPES, n + 1)
    cells, ways = _walk(rng, n, PLACES)
    where = dict(zip(shapes, cells))
    # The official files make the inner shape the subject of its fact two times in three.
    facts = _chain_links(rng, shapes, ways, p_outer=1 / 3)
    questions = []
    for _ in range(knob(knobs.questions, 8, 1, 100, "questions")):
        x, y = rng.sample([shapes[0], shapes[-1]], 2)
        dx, dy = where[x][0] - where[y][0], where[x][1] - where[y][1]
        truth = rng.random() < 0.5
        rels = [r for r, (ux, uy) in PLACES.items() if (ux * dx + uy * dy > 0) == truth]
        support = tuple(range(1, n + 1)) if x == shapes[0] else tuple(range(n, 0, -1))
        questions.append((f"Is the {x} {rng.choice(rels)} the {y}?", "yes" if truth else "no", support))
    return _story([f"The {a} is {rel} the {b}." for a, rel, b in facts], questions)


# ---------------------------------------------------------------------------- task 18

def _size_questions(told: list[tuple[str, str]], objects: list[str]) -> list[tuple[str, str, str]]:
    """(bigger, middle, smaller) for pairs linked by exactly one two-fact chain and no fact."""
    out = []
    for j, hi in enumerate(objects):
        for lo in objects[:j]:
            mids = [m for m in objects if (hi, m) in told and (m, lo) in told]
            if len(mids) == 1 and (hi, lo) not in told:
                out.append((hi, mids[0], lo))
    return out


def _size_fact(rng: random.Random, big: str, small: str) -> str:
    return f"The {small} fits inside the {big}." if rng.random() < 0.5 else f"The {big} is bigger than the {small}."


@register(18, {"questions", "length"})
def size_reasoning(rng: random.Random, knobs: Knobs) -> Story:
    block = knob(knobs.length, 5, 1, 7, "length")  # two blocks never exhaust the 15 pairs
    n_questions = knob(knobs.questions, 5, 1, 100, "questions")
    while True:  # a world with no question after two blocks is dropped (one in twelve)
        objects = SMALLEST + rng.sample(CONTAINERS, len(CONTAINERS))  # ascending size
        pairs = [(big, small) for j, big in enumerate(objects) for small in objects[:j]]
        told: list[tuple[str, str]] = []
        for _ in range(2):
            told += rng.sample([p for p in pairs if p not in told], block)
            options = _size_questions(told, objects)
            if options:
                break
        if options:
            break
    questions = []
    for _ in range(n_questions):
        hi, mid, lo = rng.choice(options)
        upper, lower = told.index((hi, mid)) + 1, told.index((mid, lo)) + 1
        truth = rng.random() < 0.5
        a, b = (hi, lo) if truth else (lo, hi)  # the question claims a > b
        text = f"Is the {a} bigger than the {b}?" if rng.random() < 0.5 else f"Does the {b} fit in the {a}?"
        questions.append((text, "yes" if truth else "no", (upper, lower) if truth else (lower, upper)))
    return _story([_size_fact(rng, big, small) for big, small in told], questions)


# ---------------------------------------------------------------------------- task 19

@register(19, {"length", "distractors"})
def path_finding(rng: random.Random, knobs: Knobs) -> Story:
    steps = knob(knobs.length, 2, 1, len(ROOMS) - 1, "length")
    decoys = knob(knobs.distractors, 3, 0, len(ROOMS) - 1 - steps, "distractors")
    rooms = rng.sample(ROOMS, steps + 1 + decoys)
    cells, ways = _walk(rng, steps, WAYS)
    path = rooms[: steps + 1]
    facts = [_link(rng, path[i], path[i + 1], way, 0.5) for i, way in enumerate(ways)]
    taken = set(cells)
    for room in rooms[steps + 1:]:
        # A decoy hangs off a room of the path, never another decoy, as in the official files.
        spots = [(near, w) for near, (x, y) in zip(path, cells) for w, (dx, dy) in WAYS.items()
                 if (x + dx, y + dy) not in taken]
        near, way = rng.choice(spots)
        x, y = cells[path.index(near)]
        taken.add((x + WAYS[way][0], y + WAYS[way][1]))
        facts.append(_link(rng, near, room, way, 0.75))  # the official mix: the decoy leads 3 in 4
    order = list(range(len(facts)))
    rng.shuffle(order)
    support = tuple(order.index(i) + 1 for i in range(steps))
    question = (f"How do you go from the {path[0]} to the {path[-1]}?", ",".join(w[0] for w in ways), support)
    return _story([f"The {a} is {rel} of the {b}." for a, rel, b in (facts[i] for i in order)], [question])
