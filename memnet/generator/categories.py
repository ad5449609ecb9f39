"""Category reasoning: deduction (15), induction (16), agents' motivations (20) and chain.

Each story comes from a tiny world simulated here; the sentences describe that world.

Task 15, basic deduction. Every species fears one other species; four named animals each
belong to a species. A species' rule is told before any of its members, then four questions
(names drawn with replacement) follow the eight facts; support = (membership, rule):

    1 Mice are afraid of wolves.        2 Gertrude is a mouse.
    9 What is gertrude afraid of?   wolf   2 1

Task 16, basic induction. Five animals, each of a random kind; an animal often (LOOKALIKE)
has the colour last told of its kind, else any colour, so animals of a kind usually agree
but not always. Each animal's kind is told, and later its colour, in a random order; the
story stops before the last colour would be told, and asks for it. The answer is induced from
the animal of the same kind introduced last: support = (the asked animal's kind fact, that
animal's kind fact, its colour fact). Where the asked animal's kind-mates differ in colour
(7.5% of the questions, as in the official files) the answer still comes from the one
introduced last, which is how the official files answer all their 150 such questions:

    1 Bernhard is a swan.  3 Lily is a swan.  4 Brian is a swan.  5 Greg is a swan.
    6 Brian is green.  8 Bernhard is gray.  9 Lily is white.
    10 What color is Greg?   green   5 4 6

Task 20, agents' motivations. Four agents each get a motivation (drawn with replacement),
go where it leads and, if the object there is still free, take it; one agent acts at a time.
Every fact is followed by its question; support = the agent's motivation fact:

    1 Sumit is tired.                 2 Where will sumit go?   bedroom   1
    3 Sumit went back to the bedroom. 4 Why did sumit go to the bedroom?   tired   1

Knobs honoured (declared at each @register): 15: questions (default 4), actors (named
animals, default 4, at most 4); 16: actors (animals, default 5, 2 to 9); 20: actors (agents,
default 4, at most 4). Other knobs do not apply to these tasks and are refused.

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
default: whatever fills the story to `length`). Length and distractors are two ways to say
one thing, so giving both is refused.
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


def _ordered(rng: random.Random, n: int, after: dict[int, int]) -> list[int]:
    """A random order of fact indices 0..n-1 in which fact i comes after fact after[i]."""
    waiting = set(range(n))
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


# the chance that an animal has the colour last told of its kind (otherwise any colour), set so
# that the asked animal's kind-mates differ in colour as often as in the official files (7.5% of
# the questions; 7.5% here over seeds 0-5, 6.6% with 0.5). Three animals of a kind then show
# the official mix of colours (one colour in 37% of cases, there 36%), two share theirs in 57%
# (there 66%): no single chance matches both
LOOKALIKE = 0.42
# the asked animal never has exactly two others of its kind: none of the 2000 official questions
# does; with kinds drawn at random otherwise it has one, three or four others in 89%, 10% and
# 1% of the stories, as in the official files (89%, 9.7%, 1.3%)
NEVER_PARTNERS = 2


def _told_order(rng: random.Random, n: int) -> list[int]:
    """The order in which the facts of n animals are told: fact i is animal i's kind, fact
    n + i its colour, told after its kind; each next fact is drawn among those that can come."""
    return _ordered(rng, 2 * n, {n + i: i for i in range(n)})


def _kinds(rng: random.Random, names: list[str], x: str) -> dict[str, str]:
    """Every animal's kind, drawn until x has others of its kind (the question's premise) and
    not exactly NEVER_PARTNERS of them."""
    while True:
        kind = {name: rng.choice(INDUCTION_SPECIES) for name in names}
        others = sum(kind[y] == kind[x] for y in names if y != x)
        if others and others != NEVER_PARTNERS:
            return kind


@register(16, {"actors"})
def induction(rng: random.Random, knobs: Knobs) -> Story:
    n = knob(knobs.actors, 5, 2, len(INDUCTION_NAMES + EXTRA_NAMES), "actors")  # a pair shares a species
    pool = INDUCTION_NAMES if n <= len(INDUCTION_NAMES) else INDUCTION_NAMES + EXTRA_NAMES
    names = _pick(pool, n, "actors", rng)
    order = _told_order(rng, n)
    x = names[order.pop() - n]  # the story stops before the last colour: the question asks for it
    kind = _kinds(rng, names, x)
    ids: dict[int, int] = {}  # fact index -> line id
    colour: dict[str, str] = {}  # the colours told so far, in the order told
    lines: list[Line] = []
    for i in order:
        name = names[i % n]
        if i < n:
            text = f"{name} is {article(kind[name])} {kind[name]}."
        else:
            seen = [colour[y] for y in colour if kind[y] == kind[name]]
            colour[name] = seen[-1] if seen and rng.random() < LOOKALIKE else rng.choice(COLOURS)
            text = f"{name} is {colour[name]}."
        ids[i] = len(lines) + 1
        lines.append(Line(ids[i], text))
    # induction from the animal of x's kind introduced last; where the others of x's kind differ
    # in colour, the official files answer with that one's too (150 of their 150 such questions)
    partner = max((y for y in names if y != x and kind[y] == kind[x]), key=lambda y: ids[names.index(y)])
    k = names.index(partner)
    support = (ids[names.index(x)], ids[k], ids[n + k])
    lines.append(Line(len(lines) + 1, f"What color is {x}?", colour[partner], support))
    return Story(lines)


# ---------------------------------------------------------------------------- task 15

DEDUCTION_NAMES = ["Gertrude", "Winona", "Emily", "Jessica"]
DEDUCTION_SPECIES = ["mouse", "cat", "sheep", "wolf"]


@register(15, {"questions", "actors"})
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
    order = _ordered(rng, len(facts), after)
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


@register(20, {"actors"})
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


@register(CHAIN, {"hops", "questions", "length", "distractors"})
def chain(rng: random.Random, knobs: Knobs) -> Story:
    free = {"names": CHAIN_NAMES[:], "species": CHAIN_SPECIES[:], "classes": CLASSES[:]}
    for pool in free.values():
        rng.shuffle(pool)
    asked = []
    hops = knob(knobs.hops, 4, 1, MAX_HOPS, "hops")
    if knobs.length is not None and knobs.distractors is not None:  # distractors would override length unsaid
        raise KnobError("length/distractors: either one sets the distractors (length: the facts a story is filled "
                        "up to; distractors: how many), so give one of the two")
    for _ in range(knobs.questions or 1):
        made = _chain(rng, rng.randint(1, hops), free)
        if made is None:
            raise KnobError(f"questions/hops: too many for one story ({knobs.questions or 1} questions, up to {hops} hops)")
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
