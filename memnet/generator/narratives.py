"""Narrative tasks: who gave what to whom (5), pronouns (11, 13), conjunction (12), time (14).

Each story comes from a small simulated world: actors with places (and, in task 5,
objects they pick up, hand over and drop), told as sentences in the official templates.
Questions are asked only when exactly one answer is defensible from the facts told so
far (task 14 also asks about a place visited twice, read at its latest visit as the
official files do); the solver (memnet.solver.narratives) recomputes every answer from the
text alone.

Knobs honoured (None keeps the official setting):
  5   questions (5), actors (4, at most 4), length (facts between questions: 2)
  11  questions (5), actors (4), length (facts between questions: 2, told in pairs)
  12  questions (5), actors (4, at least 2), length (facts between questions: 2)
  13  questions (5), actors (4, at least 2), length (facts between questions: 2, in pairs)
  14  questions (5), actors (4), length (facts between questions: 2)
No task here has distractors of its own (--distractors is refused): the moves of the other
actors play that part.
"""
from __future__ import annotations

import random

from memnet.generator import Knobs, Line, Story, knob, register

KNOBS = {"questions", "length", "actors"}  # what each task here reads (the table above)

MOVES = ["went to", "moved to", "journeyed to", "went back to", "travelled to"]
ROOMS = ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]
THEN = ["After that", "Afterwards", "Following that", "Then"]
PEOPLE = ["Mary", "John", "Daniel", "Sandra"]  # tasks 11-13
PRONOUN = {"Mary": "she", "Sandra": "she", "John": "he", "Daniel": "he"}


class _Teller:
    """Numbers the lines of one story as facts and questions are told."""

    def __init__(self) -> None:
        self.lines: list[Line] = []

    def fact(self, text: str) -> int:
        self.lines.append(Line(len(self.lines) + 1, text))
        return len(self.lines)

    def ask(self, text: str, answer: str, support: tuple[int, ...]) -> None:
        self.lines.append(Line(len(self.lines) + 1, text, answer, support))

    @property
    def questions(self) -> int:
        return sum(line.is_question for line in self.lines)

    def story(self) -> Story:
        return Story(self.lines)


def _elsewhere(rng: random.Random, places: list[str], here: str | None) -> str:
    return rng.choice([p for p in places if p != here])


def _by_recency(rng: random.Random, last_seen: dict[str, int], weights: list[float]) -> str:
    """An actor chosen by how recently they were mentioned: weights[0] for the latest."""
    ranked = sorted(last_seen, key=lambda a: -last_seen[a])[: len(weights)]
    return rng.choices(ranked, weights[: len(ranked)])[0]


# ---------------------------------------------------------------------------- task 5

GIVERS = ["Bill", "Fred", "Jeff", "Mary"]
OBJECTS = ["football", "apple", "milk"]
GIVE = ["gave", "passed", "handed"]
GET = ["picked up", "grabbed", "got", "took"]
DROP = ["dropped", "left", "put down", "discarded"]
# Tuned so that a story has about the official mix per story (13.7 moves, 4.3 pick-ups,
# 4.3 gives, 2.8 drops) and the official length (25 facts): a give needs two actors in one
# room, so it gets a high weight when possible and moves are mostly purposeful.
ACTION_WEIGHTS = {"move": 2.5, "get": 3.0, "give": 6.0, "drop": 1.5}
PURPOSE = 0.6  # chance that a move heads for an object to pick up or someone to give to
ASK = 0.7  # chance of a question after each group of facts, once something was given


def _give_questions(gives: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(question, answer) about the latest give that no earlier give answers differently."""
    giver, obj, taker = gives[-1]
    forms = [  # question, answer, which gives it is about, which slot of theirs answers it
        (f"What did {giver} give to {taker}?", obj, lambda g: g[0] == giver and g[2] == taker, 1),
        # listed twice: the official files ask it twice as often as each other form
        (f"What did {giver} give to {taker}?", obj, lambda g: g[0] == giver and g[2] == taker, 1),
        (f"Who received the {obj}?", taker, lambda g: g[1] == obj, 2),
        (f"Who gave the {obj}?", giver, lambda g: g[1] == obj, 0),
        (f"Who did {giver} give the {obj} to?", taker, lambda g: g[0] == giver and g[1] == obj, 2),
        (f"Who gave the {obj} to {taker}?", giver, lambda g: g[1] == obj and g[2] == taker, 0),
    ]
    return [(q, a) for q, a, about, slot in forms if {g[slot] for g in gives if about(g)} == {a}]


@register(5, KNOBS)
def three_arg_relations(rng: random.Random, knobs: Knobs) -> Story:
    actors = GIVERS[: knob(knobs.actors, 4, 2, len(GIVERS), "actors")]
    n_questions, gap = knob(knobs.questions, 5, 1, None, "questions"), knob(knobs.length, 2, 1, None, "length")
    where = {a: rng.choice(ROOMS) for a in actors}  # the reader learns these only from moves
    lying = {o: rng.choice(ROOMS) for o in OBJECTS}  # objects on the floor, by room
    held: dict[str, str] = {}  # object -> holder
    gives: list[tuple[str, str, str]] = []  # (giver, object, taker) in story order
    last_give = 0
    t = _Teller()
    while t.questions < n_questions and len(t.lines) < 200:
        for _ in range(gap):
            actor = rng.choice(actors)
            here = [o for o, room in lying.items() if room == where[actor]]
            mine = [o for o, h in held.items() if h == actor]
            company = [b for b in actors if b != actor and where[b] == where[actor]]
            kinds = ["move"] + ["get"] * bool(here) + ["drop"] * bool(mine) + ["give"] * bool(mine and company)
            kind = rng.choices(kinds, [ACTION_WEIGHTS[k] for k in kinds])[0]
            if kind == "move":
                # actors mostly go where there is something to pick up or someone to give to
                goals = [lying[o] for o in lying] if not mine else [where[b] for b in actors if b != actor]
                goals = [room for room in goals if room != where[actor]]
                if goals and rng.random() < PURPOSE:
                    where[actor] = rng.choice(goals)
                else:
                    where[actor] = _elsewhere(rng, ROOMS, where[actor])
                t.fact(f"{actor} {rng.choice(MOVES)} the {where[actor]}.")
            elif kind == "get":
                obj = rng.choice(here)
                del lying[obj]
                held[obj] = actor
                t.fact(f"{actor} {rng.choice(GET)} the {obj} there.")
            elif kind == "drop":
                obj = rng.choice(mine)
                del held[obj]
                lying[obj] = where[actor]
                there = " there" if rng.random() < 0.17 else ""
                t.fact(f"{actor} {rng.choice(DROP)} the {obj}{there}.")
            else:
                obj, taker = rng.choice(mine), rng.choice(company)
                held[obj] = taker
                gives.append((actor, obj, taker))
                last_give = t.fact(f"{actor} {rng.choice(GIVE)} the {obj} to {taker}.")
        if gives and rng.random() < ASK:
            asks = _give_questions(gives)
            if asks:
                question, answer = rng.choice(asks)
                t.ask(question, answer, (last_give,))
    return t.story()


# ---------------------------------------------------------------------------- tasks 11-13


def _where_is(rng: random.Random, t: _Teller, last_seen: dict[str, int], where: dict[str, str],
              support: dict[str, tuple[int, ...]], weights: list[float]) -> None:
    actor = _by_recency(rng, last_seen, weights)
    t.ask(f"Where is {actor}?", where[actor], support[actor])


@register(11, KNOBS)
def basic_coreference(rng: random.Random, knobs: Knobs) -> Story:
    people = PEOPLE[: knob(knobs.actors, 4, 1, len(PEOPLE), "actors")]
    pairs = max(1, knob(knobs.length, 2, 1, None, "length") // 2)
    where: dict[str, str] = {}
    support: dict[str, tuple[int, ...]] = {}
    last_seen: dict[str, int] = {}
    t = _Teller()
    for _ in range(knob(knobs.questions, 5, 1, None, "questions")):
        for _ in range(pairs):
            actor = rng.choice(people)
            where[actor] = _elsewhere(rng, ROOMS, where.get(actor))
            first = t.fact(f"{actor} {rng.choice(MOVES)} the {where[actor]}.")
            where[actor] = _elsewhere(rng, ROOMS, where[actor])
            second = t.fact(f"{rng.choice(THEN)} {PRONOUN[actor]} {rng.choice(MOVES)} the {where[actor]}.")
            support[actor], last_seen[actor] = (first, second), second
        _where_is(rng, t, last_seen, where, support, [0.64, 0.32, 0.04])
    return t.story()


@register(12, KNOBS)
def conjunction(rng: random.Random, knobs: Knobs) -> Story:
    people = PEOPLE[: knob(knobs.actors, 4, 2, len(PEOPLE), "actors")]
    where: dict[str, str] = {}
    support: dict[str, tuple[int, ...]] = {}
    last_seen: dict[str, int] = {}
    t = _Teller()
    for _ in range(knob(knobs.questions, 5, 1, None, "questions")):
        for _ in range(knob(knobs.length, 2, 1, None, "length")):
            pair = rng.sample(people, 2)
            room = rng.choice(ROOMS)
            i = t.fact(f"{pair[0]} and {pair[1]} {rng.choice(MOVES)} the {room}.")
            for actor in pair:
                where[actor], support[actor], last_seen[actor] = room, (i,), i
        _where_is(rng, t, last_seen, where, support, [4, 4, 3, 1])
    return t.story()


@register(13, KNOBS)
def compound_coreference(rng: random.Random, knobs: Knobs) -> Story:
    people = PEOPLE[: knob(knobs.actors, 4, 2, len(PEOPLE), "actors")]
    pairs = max(1, knob(knobs.length, 2, 1, None, "length") // 2)
    where: dict[str, str] = {}
    support: dict[str, tuple[int, ...]] = {}
    last_seen: dict[str, int] = {}
    t = _Teller()
    for _ in range(knob(knobs.questions, 5, 1, None, "questions")):
        for _ in range(pairs):
            pair = rng.sample(people, 2)
            room = rng.choice(ROOMS)
            first = t.fact(f"{pair[0]} and {pair[1]} {rng.choice(MOVES)} the {room}.")
            room = _elsewhere(rng, ROOMS, room)
            second = t.fact(f"{rng.choice(THEN)} they {rng.choice(MOVES)} the {room}.")
            for rank, actor in enumerate(pair):
                where[actor], support[actor] = room, (first, second)
                last_seen[actor] = 2 * second + rank  # tie-break so both rank above older ones
        _where_is(rng, t, last_seen, where, support, [6, 6, 1, 0.2])
    return t.story()


# ---------------------------------------------------------------------------- task 14

TRAVELLERS = ["Bill", "Fred", "Julie", "Mary"]
SITES = ["bedroom", "cinema", "kitchen", "office", "park", "school"]
TIMES = ["yesterday", "this morning", "this afternoon", "this evening"]


# Chance that an actor's next time of day k is told as a flashback: k+1 first, then k, both
# before the next question (the official files never split one, and rarely tell one actor's
# day forward twice between two questions).
FLASHBACK = [0.45, 0.17, 0.3]
EARLY = 0.37  # chance of a question after the first chunk already: most official stories wait for a second


@register(14, KNOBS)
def time_reasoning(rng: random.Random, knobs: Knobs) -> Story:
    actors = TRAVELLERS[: knob(knobs.actors, 4, 1, len(TRAVELLERS), "actors")]
    gap = knob(knobs.length, 2, 1, None, "length")
    day: dict[str, list[str]] = {}
    for a in actors:  # where each actor was at each time; never the same place twice running
        day[a] = [rng.choice(SITES)]
        while len(day[a]) < len(TIMES):
            day[a].append(_elsewhere(rng, SITES, day[a][-1]))
    untold = {a: 0 for a in actors}  # actor -> their first time of day not told yet
    told: dict[str, dict[int, int]] = {a: {} for a in actors}  # actor -> time -> fact id
    last_seen: dict[str, int] = {}
    t = _Teller()
    while t.questions < knob(knobs.questions, 5, 1, None, "questions") and any(k < len(TIMES) for k in untold.values()):
        room, chunk = gap, set()
        while room > 0:
            waiting = [a for a in actors if untold[a] < len(TIMES)]
            if not waiting:
                break
            actor = rng.choice([a for a in waiting if a not in chunk] or waiting)
            k = untold[actor]
            order = [k + 1, k] if room >= 2 and k + 1 < len(TIMES) and rng.random() < FLASHBACK[k] else [k]
            for time in order:
                when, place, verb = TIMES[time], day[actor][time], rng.choice(MOVES)
                text = (f"{when.capitalize()} {actor} {verb} the {place}." if rng.random() < 0.5
                        else f"{actor} {verb} the {place} {when}.")
                told[actor][time] = last_seen[actor] = t.fact(text)
            untold[actor] += len(order)
            room -= len(order)
            chunk.add(actor)
        # askable: the latest told visit to a place, with the time before it told; a place
        # visited twice is asked about at its latest visit, as the official files do
        options = {}
        for a, times in told.items():
            latest = {day[a][k]: k for k in sorted(times)}
            askable = [k for k in latest.values() if k - 1 in times]
            if askable:
                options[a] = rng.choices(askable, askable)[0]
        if options and (t.questions or len(t.lines) > gap or rng.random() < EARLY):
            actor = _by_recency(rng, {a: last_seen[a] for a in options}, [0.46, 0.3, 0.19, 0.05])
            k = options[actor]
            t.ask(f"Where was {actor} before the {day[actor][k]}?", day[actor][k - 1],
                  (told[actor][k], told[actor][k - 1]))
    return t.story()
