"""Tasks 4, 17, 18, 19: the generator against the text-only solver and the official files."""
import re

import pytest

from memnet.babi import format_stories, samples
from memnet.generator import KnobError, Knobs, generate
from memnet.generator.relations import CONTAINERS, ROOMS, SHAPES, SMALLEST
from memnet.solver import check

TASKS = [4, 17, 18, 19]

# The first story of seed 0, cut after its first question (generate(task, 1, 0)).
GOLDEN = {
    4: "1 The office is east of the kitchen.\n2 The hallway is west of the kitchen.\n"
       "3 What is the kitchen west of?\toffice\t1\n",
    17: "1 The triangle is to the left of the red sphere.\n2 The triangle is above the red square.\n"
        "3 Is the red square below the red sphere?\tyes\t2 1\n",
    18: "1 The box of chocolates fits inside the box.\n2 The container is bigger than the suitcase.\n"
        "3 The chocolate fits inside the suitcase.\n4 The chocolate fits inside the box.\n"
        "5 The suitcase fits inside the chest.\n6 Does the chest fit in the chocolate?\tno\t3 5\n",
    19: "1 The hallway is east of the bedroom.\n2 The garden is west of the bedroom.\n"
        "3 The kitchen is north of the office.\n4 The bedroom is north of the kitchen.\n"
        "5 The bathroom is north of the garden.\n6 How do you go from the kitchen to the garden?\tn,w\t4 2\n",
}


@pytest.mark.parametrize("task, knobs", [
    (4, Knobs(questions=3, length=5)),
    (17, Knobs(questions=4, length=4)),
    (18, Knobs(questions=2, length=3)),
    (19, Knobs(length=3, distractors=2)),
])
def test_knobs_are_honoured_and_keep_solver_agreement(task, knobs):
    stories = generate(task, 600, seed=2, knobs=knobs)
    assert check(task, stories) == []
    if knobs.questions:
        assert {len(s.questions) for s in stories[:-1]} == {knobs.questions}
    if task == 18:  # facts come in blocks of `length`
        assert {len(s.facts) % knobs.length for s in stories} == {0}
    elif task == 19:
        assert {len(s.facts) for s in stories} == {knobs.length + knobs.distractors}
        assert {len(s.questions[0].answer.split(",")) for s in stories} == {knobs.length}
    else:
        assert {len(s.facts) for s in stories} == {knobs.length}


def test_knobs_out_of_range_are_refused():
    with pytest.raises(KnobError, match="task 19: distractors: expected 0 to 2 for this task, found 3"):
        generate(19, 1, 0, knobs=Knobs(length=3, distractors=3))  # only six rooms
    with pytest.raises(KnobError, match="length"):
        generate(17, 1, 0, knobs=Knobs(length=6))  # only six shapes


@pytest.mark.parametrize("task", TASKS)
def test_golden_first_story(task):
    assert format_stories(generate(task, 1, 0), space=False) == GOLDEN[task]


_NAMES = re.compile(r"\b(%s)\b" % "|".join(sorted(ROOMS + SHAPES + SMALLEST + CONTAINERS, key=len, reverse=True)))


def _names(text):
    return _NAMES.findall(text)


@pytest.mark.parametrize("task", TASKS)
def test_support_in_range_and_reasoning_order(task):
    """Support walks from the question's first thing to its second, one shared thing per step."""
    for sample in samples(generate(task, 1000, seed=3)):
        ids = [f.id for f in sample.facts]
        support = sample.question.support
        assert support and all(i in ids for i in support)
        told = [set(_names(sample.facts[ids.index(i)].text)) for i in support]
        asked = _names(sample.question.text)
        if task == 4:
            assert len(support) == 1 and set(asked) | {sample.question.answer} == told[0]
            continue
        if task == 18:  # "Does the B fit in the A?" walks from A
            asked = asked[::-1] if sample.question.text.startswith("Does") else asked
        assert asked[0] in told[0] and asked[1] in told[-1]
        assert all(len(a & b) == 1 for a, b in zip(told, told[1:]))


def test_size_questions_are_never_ambiguous():
    """qa18: each asked pair has one two-fact chain, no direct fact, and no fact is told twice."""
    for story in generate(18, 1000, seed=4):
        assert len({f.text for f in story.facts}) == len(story.facts)
        pairs = [frozenset(_names(f.text)) for f in story.facts]
        assert len(set(pairs)) == len(pairs)
        for q in story.questions:
            assert frozenset(_names(q.text)) not in pairs

