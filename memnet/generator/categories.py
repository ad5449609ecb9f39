"""Category reasoning: deduction (15), induction (16), agents' motivations (20) and chain.

Each story comes from a tiny world simulated here; the sentences describe that world.

Task 15, basic deduction. Every species fears one other species; four named animals each
belong to a species. A species' rule is told before any of its members, then four questions
(names drawn with replacement) follow the eight facts; support = (membership, rule):

    1 Mice are afraid of wolves.        2 Gertrude is a mouse.
    9 What is gertrude afraid of?   wolf   2 1

Task 16, basic induction. Five animals; in this world every species has one colour, so all
coloured animals of a species agree and the question is never ambiguous. The asked animal has
a same-species partner and no colour fact; support = (its species fact, the partner's species
fact, the partner's colour fact), the partner being the one whose species fact is latest,
as in the official files:

    6 Julius is a swan.  7 Julius is green.  9 Greg is a swan.
    10 What color is Greg?   green   9 6 7

Task 20, agents' motivations. Four agents each get a motivation (drawn with replacement),
go where it leads and, if the object there is still free, take it; one agent acts at a time.
Every fact is followed by its question; support = the agent's motivation fact:

    1 Sumit is tired.                 2 Where will sumit go?   bedroom   1
    3 Sumit went back to the bedroom. 4 Why did sumit go to the bedroom?   tired   1

Knobs honoured: 15: questions (default 4), actors (named animals, default 4, at most 4);
16: actors (animals, default 5, 2 to 9); 20: actors (agents, default 4, at most 4).
Other knobs do not apply to these tasks and are ignored.

Chain (memnet's own family, ``memnet.babi.CHAIN``). One question form, "What color is X?",
for every depth, so the story alone decides how many hops a question needs. A question of
depth h is answered by exactly h facts, each reachable from a word of the previous one:

    h=1  X is green.                                   (a colour fact)
    h=2  X is a swan. Swans are green.                 (deduction: a species rule)
    h=3  X is a swan. Y is a swan. Y is green.         (induction, the qa16 pattern)
    h=4  X is a swan. Swans are wumpuses. Y is a wumpus. Y is green.
    h=5  X is a swan. Swans are wumpuses. Wumpuses are zumpuses. Y is a zumpus. Y is green.

From h=4 on, the species climbs h-3 links of a class hierarchy before the induction step.
The classes have made-up names (as in ProntoQA) so no link contradicts real-world knowledge.
Each question draws h uniformly from 1..K (K = knobs.hops). Distractors are whole or cut
chains about other names, species and classes; no symbol is shared between chains, so the
asked name has exactly one derivation and the question cannot be ambiguous. All facts are
shuffled and the questions come at the end. Knobs honoured: hops (K, default 4), questions
(per story, default 1), length (facts per story, default 10), distractors (distractor facts;
default: whatever fills the story to `length`).
"""
from __future__ import annotations

import random

from memnet.babi import CHAIN, Line, Story
from memnet.generator import Knobs, KnobError, knob, register

COLOURS = ["yellow", "green", "white", "gray"]
PLURAL = {"mouse": "mice", "wolf": "wolves", "sheep": "sheep", "cat": "cats",
          "frog": "frogs", "lion": "lions", "swan": "swans", "rhino": "rhinos"}


def plural(kind: str) -> str:
    return PLURAL.get(kind, kind + "es" if kind.endswith("s") else kind + "s")


def article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def _ordered(rng: random.Random, facts: list[str], after: dict[int, int]) -> list[int]:
    """A random order of fact indices in which fact i comes after fact after[i]."""
    waiting = set(range(len(facts)))
    order: list[int] = []
    while waiting:
        ready = sorted(i for i in waiting if after.get(i) is None or after[i] in order)
        i = rng.choice(ready)
        order.append(i)
        waiting.remove(i)
    return order


def _pick(pool: list[str], n: int, name: str, rng: random.Random) -> list[str]:
    return rng.sample(pool, knob(n, n, 1, len(pool), name))


# ---------------------------------------------------------------------------- task 16

INDUCTION_NAMES = ["Lily", "Julius", "Brian", "Bernhard", "Greg"]
EXTRA_NAMES = ["Gertrude", "Winona", "Emily", "Jessica"]  # only when actors > 5
INDUCTION_SPECIES = ["frog", "lion", "swan", "rhino"]


@register(16)
def induction(rng: random.Random, knobs: Knobs) -> Story:
    n = knob(knobs.actors, 5, 2, len(INDUCTION_NAMES + EXTRA_NAMES), "actors")  # a pair shares a species
    pool = INDUCTION_NAMES if n <= len(INDUCTION_NAMES) else INDUCTION_NAMES + EXTRA_NAMES
    names = _pick(pool, n, "actors", rng)
    while True:  # the asked animal needs a partner of its species
        species = {name: rng.choice(INDUCTION_SPECIES) for name in names}
        asked = [x for x in names if sum(s == species[x] for s in species.values()) > 1]
        if asked:
            break
    x = rng.choice(asked)
    colour_of = {s: rng.choice(COLOURS) for s in INDUCTION_SPECIES}  # one colour per species
    facts = [f"{name} is a {species[name]}." for name in names]
    after = {}
    for i, name in enumerate(names):
        if name != x:
            after[len(facts)] = i  # an animal's colour is told after its species
            facts.append(f"{name} is {colour_of[species[name]]}.")
    order = _ordered(rng, facts, after)
    ids = {fact_index: k + 1 for k, fact_index in enumerate(order)}
    lines = [Line(ids[i], facts[i]) for i in order]
    partners = [i for i, name in enumerate(names) if name != x and species[name] == species[x]]
    partner = max(partners, key=ids.get)  # the latest species fact, as the official files choose
    colour_fact = next(j for j, i in after.items() if i == partner)
    support = (ids[names.index(x)], ids[partner], ids[colour_fact])
    lines.append(Line(len(lines) + 1, f"What color is {x}?", colour_of[species[x]], support))
    return Story(lines)


# ---------------------------------------------------------------------------- task 15

DEDUCTION_NAMES = ["Gertrude", "Winona", "Emily", "Jessica"]
DEDUCTION_SPECIES = ["mouse", "cat", "sheep", "wolf"]


@register(15)
def deduction(rng: random.Random, knobs: Knobs) -> Story:
    names = _pick(DEDUCTION_NAMES, knobs.actors or 4, "actors", rng)
    fears = {s: rng.choice([t for t in DEDUCTION_SPECIES if t != s]) for s in DEDUCTION_SPECIES}
    species = {name: rng.choice(DEDUCTION_SPECIES) for name in names}
    rules = rng.sample(DEDUCTION_SPECIES, len(DEDUCTION_SPECIES))
    facts = [f"{plural(s).capitalize()} are afraid of {plural(fears[s])}." for s in rules]
    after = {}
    for name in names:  # a species' rule is told before its members
        after[len(facts)] = rules.index(species[name])
        facts.append(f"{name} is {article(species[name])} {species[name]}.")
    order = _ordered(rng, facts, after)
    ids = {fact_index: k + 1 for k, fact_index in enumerate(order)}
    lines = [Line(ids[i], facts[i]) for i in order]
    for _ in range(knobs.questions or 4):
        k = rng.randrange(len(names))
        x, s = names[k], species[names[k]]
        support = (ids[len(rules) + k], ids[rules.index(s)])
        lines.append(Line(len(lines) + 1, f"What is {x.lower()} afraid of?", fears[s], support))
    return Story(lines)


# ---------------------------------------------------------------------------- task 20

AGENTS = ["Sumit", "Yann", "Jason", "Antoine"]
PLACE = {"tired": "bedroom", "bored": "garden", "thirsty": "kitchen", "hungry": "kitchen"}
OBJECT = {"tired": "pajamas", "bored": "football", "thirsty": "milk", "hungry": "apple"}
GO = ["went to", "went back to", "journeyed to", "travelled to", "moved to"]
GET = ["got", "grabbed", "took", "picked up"]


@register(20)
def motivations(rng: random.Random, knobs: Knobs) -> Story:
    agents = _pick(AGENTS, knobs.actors or 4, "actors", rng)
    motive = {a: rng.choice(list(PLACE)) for a in agents}
    step = {a: 0 for a in agents}  # 0: has a motivation to tell, 1: goes, 2: takes, 3: done
    free = set(OBJECT.values())
    lines: list[Line] = []
    told: dict[str, int] = {}  # agent -> id of the motivation fact

    def add(fact: str, question: str, answer: str, agent: str) -> None:
        lines.append(Line(len(lines) + 1, fact))
        told.setdefault(agent, len(lines))
        lines.append(Line(len(lines) + 1, question, answer, (told[agent],)))

    while busy := [a for a in agents if step[a] < 3]:
        a = rng.choice(busy)
        m, who = motive[a], a.lower()
        if step[a] == 0:
            add(f"{a} is {m}.", f"Where will {who} go?", PLACE[m], a)
        elif step[a] == 1:
            add(f"{a} {rng.choice(GO)} the {PLACE[m]}.", f"Why did {who} go to the {PLACE[m]}?", m, a)
        elif OBJECT[m] in free:  # an object is taken once: a second hungry agent finds no apple
            free.remove(OBJECT[m])
            add(f"{a} {rng.choice(GET)} the {OBJECT[m]} there.", f"Why did {who} get the {OBJECT[m]}?", m, a)
        step[a] += 1
    return Story(lines)


# ---------------------------------------------------------------------------- chain

CHAIN_NAMES = INDUCTION_NAMES + DEDUCTION_NAMES + AGENTS + ["Mary", "John", "Sandra", "Daniel"]
CHAIN_SPECIES = INDUCTION_SPECIES + DEDUCTION_SPECIES
CLASSES = ["wumpus", "yumpus", "zumpus", "dumpus", "impus", "jompus",
           "gorpus", "lempus", "numpus", "rompus", "tumpus", "vumpus"]
MAX_HOPS = 3 + len(CLASSES)  # the deepest chain climbs every class


def _chain(rng: random.Random, h: int, free: dict[str, list[str]]) -> tuple[str, str, list[str]] | None:
    """(name, colour, the h facts that tell its colour, in reasoning order), using up
    unused symbols from `free`; None when too few are left."""
    need = {"names": 1 + (h >= 3), "species": int(h >= 2), "classes": max(0, h - 3)}
    if any(len(free[k]) < n for k, n in need.items()):
        return None
    x, colour = free["names"].pop(), rng.choice(COLOURS)
    if h == 1:
        return x, colour, [f"{x} is {colour}."]
    kinds = [free["species"].pop()] + [free["classes"].pop() for _ in range(h - 3)]
    facts = [f"{x} is {article(kinds[0])} {kinds[0]}."]
    if h == 2:
        return x, colour, facts + [f"{plural(kinds[0]).capitalize()} are {colour}."]
    facts += [f"{plural(a).capitalize()} are {plural(b)}." for a, b in zip(kinds, kinds[1:])]
    y, top = free["names"].pop(), kinds[-1]
    return x, colour, facts + [f"{y} is {article(top)} {top}.", f"{y} is {colour}."]


@register(CHAIN)
def chain(rng: random.Random, knobs: Knobs) -> Story:
    free = {"names": CHAIN_NAMES[:], "species": CHAIN_SPECIES[:], "classes": CLASSES[:]}
    for pool in free.values():
        rng.shuffle(pool)
    asked = []
    hops = knob(knobs.hops, 4, 1, MAX_HOPS, "hops")
    for _ in range(knobs.questions or 1):
        made = _chain(rng, rng.randint(1, hops), free)
        if made is None:
            raise KnobError(f"questions/hops: too many for one story ({knobs.questions} questions, up to {knobs.hops} hops)")
        asked.append(made)
    facts = [f for _, _, chain_facts in asked for f in chain_facts]
    left = knobs.distractors if knobs.distractors is not None else max(0, (knobs.length or 10) - len(facts))
    while left > 0 and (made := _chain(rng, rng.randint(1, hops), free)):
        facts += made[2][:left]  # a cut chain: facts about names no question asks after
        left -= len(made[2][:left])
    order = rng.sample(range(len(facts)), len(facts))
    ids = {f: k + 1 for k, f in enumerate(facts[i] for i in order)}  # facts never repeat
    lines = [Line(ids[facts[i]], facts[i]) for i in order]
    for x, colour, chain_facts in asked:
        lines.append(Line(len(lines) + 1, f"What color is {x}?", colour, tuple(ids[f] for f in chain_facts)))
    return Story(lines)
