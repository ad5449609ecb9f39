"""Tasks 15, 16, 20 and chain: the generator against the text-only solver and the official files."""
import re
from collections import Counter

import pytest

from memnet.babi import CHAIN, Line, format_stories, load_split, samples, space_before_tab
from memnet.generator import Knobs, generate
from memnet.generator.categories import CHAIN_SPECIES, CLASSES, plural
from memnet.solver import Solution, check, solve

TASKS = [15, 16, 20, CHAIN]

# The first story of generate(task, 10, seed=0).
GOLDEN = {
    15: "1 Cats are afraid of wolves.\n2 Emily is a cat.\n3 Wolves are afraid of sheep.\n4 Jessica is a wolf.\n"
        "5 Sheep are afraid of wolves.\n6 Mice are afraid of sheep.\n7 Winona is a mouse.\n8 Gertrude is a mouse.\n"
        "9 What is jessica afraid of?\tsheep\t4 3\n10 What is jessica afraid of?\tsheep\t4 3\n"
        "11 What is gertrude afraid of?\tsheep\t8 6\n12 What is emily afraid of?\twolf\t2 1\n",
    16: "1 Bernhard is a swan.\n2 Julius is a frog.\n3 Lily is a swan.\n4 Brian is a swan.\n5 Greg is a swan.\n"
        "6 Brian is green.\n7 Julius is white.\n8 Bernhard is gray.\n9 Lily is white.\n"
        "10 What color is Greg?\tgreen\t5 4 6\n",  # the swans differ: Brian's kind was told last
    20: "1 Jason is thirsty.\n2 Where will jason go?\tkitchen\t1\n3 Sumit is tired.\n4 Where will sumit go?\tbedroom\t3\n"
        "5 Jason went to the kitchen.\n6 Why did jason go to the kitchen?\tthirsty\t1\n"
        "7 Sumit went back to the bedroom.\n8 Why did sumit go to the bedroom?\ttired\t3\n"
        "9 Antoine is bored.\n10 Where will antoine go?\tgarden\t9\n11 Sumit picked up the pajamas there.\n"
        "12 Why did sumit get the pajamas?\ttired\t3\n13 Jason picked up the milk there.\n"
        "14 Why did jason get the milk?\tthirsty\t1\n15 Yann is thirsty.\n16 Where will yann go?\tkitchen\t15\n"
        "17 Yann journeyed to the kitchen.\n18 Why did yann go to the kitchen?\tthirsty\t15\n"
        "19 Antoine journeyed to the garden.\n20 Why did antoine go to the garden?\tbored\t9\n",
    CHAIN: "1 Jessica is a wolf.\n2 Frogs are white.\n3 Antoine is a rhino.\n4 Wolves are gorpuses.\n"
           "5 John is yellow.\n6 Yann is a frog.\n7 Rhinos are rompuses.\n8 Bernhard is green.\n"
           "9 Emily is white.\n10 John is a gorpus.\n11 What color is Bernhard?\tgreen\t8\n",
}


@pytest.mark.parametrize("task, knobs", [
    (15, Knobs(actors=2, questions=6)),
    (16, Knobs(actors=8)),
    (20, Knobs(actors=2)),
    (CHAIN, Knobs(hops=6, questions=3)),
    (CHAIN, Knobs(hops=2, distractors=0)),
])
def test_knobs_keep_solver_agreement(task, knobs):
    stories = generate(task, 300, seed=2, knobs=knobs)
    assert check(task, stories) == []
    if knobs.actors:  # every full story names exactly that many actors
        for s in stories[:-1]:
            names = {w for line in s.facts for w in re.findall(r"\b[A-Z][a-z]+\b", line.text)}
            assert len(names - {"Cats", "Mice", "Sheep", "Wolves"}) == knobs.actors
    if knobs.questions:
        assert Counter(len(s.questions) for s in stories[:-1]) == {knobs.questions: len(stories) - 1}
    if task == CHAIN:
        depths = {len(q.support) for s in stories for q in s.questions}
        assert depths == set(range(1, knobs.hops + 1))
        if knobs.distractors == 0:  # only the asked chain: its facts are the story
            assert all(len(s.facts) == len(s.questions[0].support) for s in stories)


@pytest.mark.parametrize("task", TASKS)
def test_golden_first_story(task):
    assert format_stories(generate(task, 10, 0)[:1], space_before_tab(task)) == GOLDEN[task]


_SINGULAR = {plural(k): k for k in CHAIN_SPECIES + CLASSES}


def _words(fact: Line) -> set[str]:
    words = {w.lower() for w in re.findall(r"\w+", fact.text)} - {"is", "a", "an", "are"}
    return {_SINGULAR.get(w, w) for w in words}


@pytest.mark.parametrize("task", TASKS)
def test_support_in_range_and_reasoning_order(task):
    for sample in samples(generate(task, 1000, seed=3)):
        facts = {f.id: f.text for f in sample.facts}
        support = [facts[i] for i in sample.question.support]  # KeyError: out of range
        name = re.search(r"(?:is|did|will) (\w+)", sample.question.text)[1].capitalize()
        assert support[0].startswith(name + " ")  # every task's reasoning starts at the asked name
        if task == 15:
            species = support[0].split()[-1].rstrip(".")
            assert support[1].lower().startswith(plural(species) + " are afraid of ")
        elif task == 16:
            x, y, colour = (s.rstrip(".").split() for s in support)
            assert x[-1] == y[-1] and y[0] == colour[0] != x[0] and len(colour) == 3
        elif task == 20:
            assert len(support) == 1 and len(support[0].split()) == 3  # "Sumit is tired."
        else:  # each hop's fact shares a word with the one before it
            assert all(_words(Line(0, a)) & _words(Line(0, b)) for a, b in zip(support, support[1:]))
            assert support[-1].split()[-1].rstrip(".") == sample.question.answer


def test_chain_spreads_hops_uniformly():
    depths = Counter(len(q.support) for s in generate(CHAIN, 4000, seed=4) for q in s.questions)
    assert sorted(depths) == [1, 2, 3, 4]
    assert all(850 <= n <= 1150 for n in depths.values()), depths


def test_solver_answers_differing_kind_mates_by_the_official_convention():
    facts = [Line(1, "Greg is a swan."), Line(2, "Lily is a swan."), Line(3, "Lily is green."),
             Line(4, "Brian is a swan."), Line(5, "Brian is white.")]
    assert solve(16, facts, "What color is Greg?") == Solution("white", (1, 4, 5))  # Brian: the swan told last
    assert solve(CHAIN, facts, "What color is Greg?").answer == "green|white"  # chain never allows two
    assert solve(16, facts[:3], "What color is Greg?") == solve(CHAIN, facts[:3], "What color is Greg?")
    assert solve(16, facts[:3], "What color is Greg?").support == (1, 2, 3)



def _induction(stories) -> dict[str, float]:
    """qa16's world as its questions show it: how many others of the asked animal's kind there
    are, how often they differ in colour, and how often the asked animal is the last introduced."""
    others, differ, last = Counter(), 0, 0
    for sample in samples(stories):
        kind = {f.text.split()[0]: f.text.split()[-1] for f in sample.facts if " a " in f.text}
        colour = {f.text.split()[0]: f.text.split()[-1] for f in sample.facts if " a " not in f.text}
        x = sample.question.text.split()[-1].rstrip("?")
        mates = [y for y in kind if y != x and kind[y] == kind[x]]
        others[len(mates)] += 1
        differ += len({colour[y] for y in mates}) > 1
        last += list(kind)[-1] == x
    n = sum(others.values())
    return {"differ": differ / n, "last": last / n, **{f"others={k}": v / n for k, v in others.items()}}


# The official qa16 (train and test, 2000 questions), by _induction: its kind-mates differ in colour
# in 150 (answered by the one whose kind was told last, test_solver_on_the_official_train_file),
# the asked animal is the last introduced in 1162, and has 1, 3 or 4 others of its kind in 1781,
# 193 and 26, never 2 (test_official_induction_world_is_the_stated_one).
OFFICIAL_INDUCTION = {"differ": 0.075, "last": 0.581, "others=1": 0.8905, "others=3": 0.0965, "others=4": 0.013}


def test_induction_world_is_the_official_one():
    found = _induction(generate(16, 5000, seed=8))
    assert set(found) == set(OFFICIAL_INDUCTION)  # never two others of its kind, as there
    for key, official in OFFICIAL_INDUCTION.items():
        assert abs(found[key] - official) < 0.02, (key, found[key])


def test_official_induction_world_is_the_stated_one(babi_dir):
    stories = load_split(babi_dir / "en", 16, "train") + load_split(babi_dir / "en", 16, "test")
    assert _induction(stories) == pytest.approx(OFFICIAL_INDUCTION, abs=0.0005)
