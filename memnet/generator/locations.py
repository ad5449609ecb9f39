"""Tasks 1, 2, 3, 6, 7, 8, 9, 10: people moving between places and handling objects.

One small world serves all eight tasks. Each person has a true place (hidden until a fact
tells it); objects lie where they were last put down, or move with whoever holds them. An
object nobody has touched yet has no place in the story, so it can be found anywhere.

How a story unfolds (read off the official v1.2 train files):

- Facts come in chunks of two. After each chunk one question is asked, if one can be;
  otherwise another chunk follows. A story ends at its fifth question.
- A question can be asked only when its key fact (the latest fact about the asked person
  or object) is among the last five facts: the official questions are never about
  anything older. Among the askable persons or objects one is drawn uniformly.
- Answers come from the world; supporting facts are the facts that tell them, in
  reasoning order: task 2 "Where is the football? garden 3 6" is the pick-up, then the
  holder's move; task 3 is the object's latest fact, the move that brought it to the named
  place, the move that brought it to the place before; task 7 lists the person's object
  facts in story order; task 8 groups them by object, objects in the order the person
  first took them, which is also the order of the answer's words ("football,apple").
- Task 3 may name a place the object reached more than once (41% of the official
  questions; in 22% it came there from different places): the official files read such a
  question at its latest visit, and so do the answer and supporting moves here. A story that finds no
  question in STALL facts ends early, after its last question (task 3 only, about 1 story
  in 100: nobody carries an object long enough; the others always find one).

Knobs honoured by every task here (KNOBS, all read by `tell_story`): `questions` (per story,
default 5), `length` (facts per chunk between question chances, default 2) and `actors`
(people, default 4, at most 8; past the official four the names come from the other bAbI
tasks). `distractors` is refused: every fact here is a move or an object handled, and each
can be asked about.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from memnet.babi import Line, Story
from memnet.generator import Knobs, knob, register

PEOPLE = ["Mary", "John", "Sandra", "Daniel", "Fred", "Bill", "Julie", "Jeff"]
PEOPLE_10 = ["Mary", "Fred", "Bill", "Julie", "John", "Sandra", "Daniel", "Jeff"]  # task 10's four come first
PLACES = ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]
PLACES_10 = ["bedroom", "cinema", "kitchen", "office", "park", "school"]
OBJECTS = ["apple", "football", "milk"]
MOVES = ["moved", "went", "went back", "journeyed", "travelled"]
GETS = ["got", "took", "grabbed", "picked up"]
DROPS = ["dropped", "left", "discarded", "put down"]
GIVES = ["gave", "passed", "handed"]
NUMBERS = ["none", "one", "two", "three"]
KNOBS = {"questions", "length", "actors"}  # what tell_story reads, so every task here
RECENT = 5  # a question's key fact is among this many latest facts
STALL = 150  # facts without a question before a story gives up (the official gaps reach 122)


@dataclass
class World:
    rng: random.Random
    people: list[str]
    places: list[str]
    lines: list[Line] = field(default_factory=list)
    place: dict[str, str] = field(default_factory=dict)  # person -> true place
    said: dict[str, tuple[str, int, tuple[str, ...]]] = field(default_factory=dict)  # person -> latest place fact:
    # (kind, id, places it names); kind 'at', 'not' (task 9) or 'either' (task 10)
    holder: dict[str, str] = field(default_factory=dict)  # object -> person holding it
    lying: dict[str, str] = field(default_factory=dict)  # object -> place it was put down in
    last: dict[str, int] = field(default_factory=dict)  # object -> id of its latest fact
    # object -> id of the fact saying where its dropper was (None: never said)
    dropped_from: dict[str, int | None] = field(default_factory=dict)
    # object -> the places it is known to have been in, each with the fact that tells it
    trail: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)  # object -> trail index its latest carrier's moves start at
    # person -> object -> ids of their facts about it, objects in the order first taken
    handled: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.place = {p: self.rng.choice(self.places) for p in self.people}

    def tell(self, text: str) -> int:
        self.lines.append(Line(len(self.lines) + 1, text))
        return len(self.lines)

    def recent(self, fact_id: int) -> bool:
        """Is this fact among the RECENT latest facts?"""
        return sum(not line.is_question for line in self.lines[fact_id:]) < RECENT

    def carrying(self, person: str) -> list[str]:
        return [o for o in OBJECTS if self.holder.get(o) == person]

    def known_place(self, person: str) -> tuple[str, int] | None:
        """(place, fact id) when the story has said where the person is."""
        kind, fact, _ = self.said.get(person, (None, 0, ()))
        return (self.place[person], fact) if kind == "at" else None

    # ------------------------------------------------------------------ actions

    def move(self, person: str, template: str | None = None) -> None:
        """Go somewhere new; `template` ("{p} is in the {l}.") for the stative form."""
        to = self.rng.choice([pl for pl in self.places if pl != self.place[person]])
        text = (template or "{p} " + self.rng.choice(MOVES) + " to the {l}.").format(p=person, l=to)
        self.place[person] = to
        fact = self.tell(text)
        self.said[person] = ("at", fact, (to,))
        for obj in self.carrying(person):
            self._arrive(obj, (to, fact))

    def leave(self, person: str) -> None:
        """Task 9: 'Mary is no longer in the kitchen.' Mary is now somewhere unsaid."""
        left = self.place[person]
        fact = self.tell(f"{person} {self.rng.choice(['is not', 'is no longer'])} in the {left}.")
        self.place[person] = self.rng.choice([pl for pl in self.places if pl != left])
        self.said[person] = ("not", fact, (left,))

    def either(self, person: str) -> None:
        """Task 10: 'Fred is either in the school or the park.' One of them is true."""
        self.place[person] = self.rng.choice([pl for pl in self.places if pl != self.place[person]])
        other = self.rng.choice([pl for pl in self.places if pl != self.place[person]])
        pair = self.rng.sample([self.place[person], other], 2)
        fact = self.tell(f"{person} is either in the {pair[0]} or the {pair[1]}.")
        self.said[person] = ("either", fact, tuple(pair))

    def available(self, person: str) -> list[str]:
        """Objects the person can take: free ones lying here, or never handled yet."""
        here = self.place[person]
        return [o for o in OBJECTS if o not in self.holder and self.lying.get(o, here) == here]

    def get(self, person: str, obj: str, there: float) -> None:
        suffix = " there" if self.rng.random() < there else ""
        fact = self.tell(f"{person} {self.rng.choice(GETS)} the {obj}{suffix}.")
        self.holder[obj] = person
        self.lying.pop(obj, None)
        self._touch(person, obj, fact)
        if self.known_place(person):
            self._arrive(obj, self.known_place(person))
        self.carried[obj] = len(self.trail.get(obj, []))

    def drop(self, person: str, obj: str, there: float) -> None:
        suffix = " there" if self.rng.random() < there else ""
        fact = self.tell(f"{person} {self.rng.choice(DROPS)} the {obj}{suffix}.")
        del self.holder[obj]
        self.lying[obj] = self.place[person]
        self.dropped_from[obj] = (self.known_place(person) or (None, None))[1]
        self._touch(person, obj, fact)

    def give(self, person: str, obj: str, to: str) -> None:
        fact = self.tell(f"{person} {self.rng.choice(GIVES)} the {obj} to {to}.")
        self.holder[obj] = to
        self._touch(person, obj, fact)
        self._touch(to, obj, fact)
        if self.known_place(to):
            self._arrive(obj, self.known_place(to))

    def _touch(self, person: str, obj: str, fact: int) -> None:
        self.last[obj] = fact
        self.handled.setdefault(person, {}).setdefault(obj, []).append(fact)

    def _arrive(self, obj: str, where: tuple[str, int]) -> None:
        trail = self.trail.setdefault(obj, [])
        if not trail or trail[-1][0] != where[0]:
            trail.append(where)


# ---------------------------------------------------------------------- acting

@dataclass(frozen=True)
class Habits:
    """Weights of the kinds of fact, tuned so each task's fact counts match its official file.

    The kind is drawn first, then a person who can do it: so a pick-up is often followed by
    the same person putting the thing down, as in the official files."""

    move: float = 0.6
    get: float = 0.2
    drop: float = 0.2
    give: float = 0.0  # to someone in the same place
    is_in: float = 0.0  # task 9 and 10: 'Mary is in the office.'
    unsure: float = 0.0  # task 9: 'Mary is not in the office.'; task 10: 'Fred is either in the A or the B.'
    get_there: float = 1.0  # share of 'took the X there' over 'took the X'
    drop_there: float = 0.2


def act(world: World, habits: Habits, unsure: str = "not") -> None:
    rng = world.rng
    kinds = ["move", "get", "drop", "give", "is_in", "unsure"]
    while True:
        kind = rng.choices(kinds, [getattr(habits, k) for k in kinds])[0]
        if kind == "move":
            return world.move(rng.choice(world.people))
        if kind == "is_in":
            return world.move(rng.choice(world.people), "{p} is in the {l}.")
        if kind == "unsure":
            return (world.leave if unsure == "not" else world.either)(rng.choice(world.people))
        if kind == "get":
            takers = [p for p in world.people if world.available(p)]
            if takers:
                p = rng.choice(takers)
                return world.get(p, rng.choice(world.available(p)), habits.get_there)
        if kind == "drop":
            holders = [p for p in world.people if world.carrying(p)]
            if holders:
                p = rng.choice(holders)
                return world.drop(p, rng.choice(world.carrying(p)), habits.drop_there)
        if kind == "give":
            givers = [(p, q) for p in world.people for q in world.people
                      if p != q and world.carrying(p) and world.place[p] == world.place[q]]
            if givers:
                p, q = rng.choice(givers)
                return world.give(p, rng.choice(world.carrying(p)), q)


# ---------------------------------------------------------------------- questions
# Each asker returns the askable (key fact id, ask) pairs; ask() -> (question, answer, support).

Ask = Callable[[], tuple[str, str, tuple[int, ...]]]


def where_is_actor(w: World) -> list[tuple[int, Ask]]:
    out = []
    for p in w.people:
        if w.known_place(p):
            place, fact = w.known_place(p)
            out.append((fact, lambda p=p, place=place, fact=fact: (f"Where is {p}?", place, (fact,))))
    return out


def where_is_object(w: World) -> list[tuple[int, Ask]]:
    """Task 2. A held object is asked about only once its holder has moved with it: the
    official questions always need both facts."""
    out = []
    for obj, fact in w.last.items():
        if obj in w.holder:
            known = w.known_place(w.holder[obj])
            place_fact = known[1] if known and known[1] > fact else None
        else:
            place_fact = w.dropped_from[obj]
        if place_fact:
            where = w.place[w.holder[obj]] if obj in w.holder else w.lying[obj]
            out.append((fact, lambda obj=obj, where=where, s=(fact, place_fact): (f"Where is the {obj}?", where, s)))
    return out


def where_was_object(w: World) -> list[tuple[int, Ask]]:
    """Task 3. Both places come from moves made while carrying the object since its latest
    pick-up (as in every official question). A place the object reached more than once is
    named for its latest visit only, which is how the official files read it; later moves
    are named more often (weights 2, 3, 4, ... from the earliest, fitted to the official
    choice among the askable moves)."""
    out = []
    for obj, trail in w.trail.items():
        last = {place: i for i, (place, _) in enumerate(trail)}
        steps = [i for i in range(w.carried[obj] + 1, len(trail)) if last[trail[i][0]] == i]
        if steps:
            def ask(obj=obj, trail=trail, steps=steps) -> tuple[str, str, tuple[int, ...]]:
                i = w.rng.choices(steps, range(2, len(steps) + 2))[0]
                return (f"Where was the {obj} before the {trail[i][0]}?", trail[i - 1][0],
                        (w.last[obj], trail[i][1], trail[i - 1][1]))
            out.append((w.last[obj], ask))
    return out


def is_actor_in(w: World) -> list[tuple[int, Ask]]:
    """Tasks 6, 9, 10: 'Is Mary in the office?' yes / no / maybe, half the time the true answer."""
    out = []
    for p, (kind, fact, named) in w.said.items():
        def ask(p=p, kind=kind, fact=fact, named=named) -> tuple[str, str, tuple[int, ...]]:
            others = [pl for pl in w.places if pl not in named]
            if kind == "not":  # only the named place can be ruled out
                place, answer = named[0], "no"
            elif w.rng.random() < 0.5:
                place, answer = w.rng.choice(named), "maybe" if kind == "either" else "yes"
            else:
                place, answer = w.rng.choice(others), "no"
            return f"Is {p} in the {place}?", answer, (fact,)
        out.append((fact, ask))
    return out


def _carrying(w: World, p: str, count: bool) -> tuple[str, str, tuple[int, ...]]:
    held = [o for o in w.handled[p] if w.holder.get(o) == p]  # in the order first taken
    if count:
        ids = sorted(i for ids in w.handled[p].values() for i in ids)
        return f"How many objects is {p} carrying?", NUMBERS[len(held)], tuple(ids)
    ids = [i for ids in w.handled[p].values() for i in ids]
    return f"What is {p} carrying?", ",".join(held) or "nothing", tuple(ids)


def how_many(w: World) -> list[tuple[int, Ask]]:
    return [(max(i for ids in objs.values() for i in ids), lambda p=p: _carrying(w, p, True))
            for p, objs in w.handled.items()]


def what_carrying(w: World) -> list[tuple[int, Ask]]:
    return [(max(i for ids in objs.values() for i in ids), lambda p=p: _carrying(w, p, False))
            for p, objs in w.handled.items()]


# ---------------------------------------------------------------------- stories

def tell_story(rng: random.Random, knobs: Knobs, asker: Callable[[World], list[tuple[int, Ask]]],
               habits: Habits = Habits(), unsure: str = "not",
               people: list[str] = PEOPLE, places: list[str] = PLACES) -> Story:
    questions, length = knob(knobs.questions, 5, 1, None, "questions"), knob(knobs.length, 2, 1, None, "length")
    actors = knob(knobs.actors, 4, 1, len(people), "actors")
    world = World(rng, people[:actors], places)
    asked = stalled = 0
    while asked < questions and stalled < STALL:
        for _ in range(length):
            act(world, habits, unsure)
        stalled += length
        askable = [ask for fact, ask in asker(world) if world.recent(fact)]
        if askable:
            question, answer, support = rng.choice(askable)()
            world.lines.append(Line(len(world.lines) + 1, question, answer, support))
            asked, stalled = asked + 1, 0
    while world.lines and not world.lines[-1].is_question:
        world.lines.pop()  # a story cut short ends at its last question
    return Story(world.lines)


@register(1, KNOBS)
def single_supporting_fact(rng: random.Random, knobs: Knobs) -> Story:
    return tell_story(rng, knobs, where_is_actor, Habits(get=0, drop=0))


@register(2, KNOBS)
def two_supporting_facts(rng: random.Random, knobs: Knobs) -> Story:
    return tell_story(rng, knobs, where_is_object)


@register(3, KNOBS)
def three_supporting_facts(rng: random.Random, knobs: Knobs) -> Story:
    # people put things down a little less eagerly than they pick them up: objects stay carried
    # longer, so questions come as early as in the official file (facts before a question: 50.0
    # there; 50.0 here over seeds 0-15, 53.3 with get 0.23 and drop 0.24) while the share of
    # moves, pick-ups and drops stays that of the official file (0.63, 0.19, 0.18)
    habits = Habits(move=0.53, get=0.245, drop=0.225, get_there=0.19, drop_there=0.22)
    return tell_story(rng, knobs, where_was_object, habits)


@register(6, KNOBS)
def yes_no_questions(rng: random.Random, knobs: Knobs) -> Story:
    return tell_story(rng, knobs, is_actor_in)


@register(7, KNOBS)
def counting(rng: random.Random, knobs: Knobs) -> Story:
    return tell_story(rng, knobs, how_many, Habits(move=0.55, get=0.18, drop=0.17, give=0.6))


@register(8, KNOBS)
def lists_sets(rng: random.Random, knobs: Knobs) -> Story:
    return tell_story(rng, knobs, what_carrying, Habits(move=0.55, get=0.2, drop=0.25, drop_there=0.15))


@register(9, KNOBS)
def simple_negation(rng: random.Random, knobs: Knobs) -> Story:
    return tell_story(rng, knobs, is_actor_in, Habits(move=0.5, is_in=0.25, unsure=0.25, get=0, drop=0))


@register(10, KNOBS)
def indefinite_knowledge(rng: random.Random, knobs: Knobs) -> Story:
    return tell_story(rng, knobs, is_actor_in, Habits(move=0.5, is_in=0.25, unsure=0.25, get=0, drop=0),
                      unsure="either", people=PEOPLE_10, places=PLACES_10)
