"""Tasks 1, 2, 3, 6, 7, 8, 9, 10: the generator against the text-only solver and the official files."""
import re
from statistics import mean

import pytest

from memnet.babi import answer_words, format_line, load_split, samples, tokenize
from memnet.generator import Knobs, generate
from memnet.generator.locations import PEOPLE, PEOPLE_10
from memnet.solver import check
from memnet.solver.locations import _object_trail, parse
from memnet.stats import facts_before_questions

TASKS = [1, 2, 3, 6, 7, 8, 9, 10]

# The first ten lines of the first story of generate(task, 10, seed=0).
GOLDEN = {
    1: [
        '1 Sandra went back to the office.',
        '2 Mary went to the bedroom.',
        '3 Where is Mary?\tbedroom\t2',
        '4 John moved to the office.',
        '5 Sandra went to the garden.',
        '6 Where is John?\toffice\t4',
        '7 John moved to the hallway.',
        '8 John went back to the kitchen.',
        '9 Where is Mary?\tbedroom\t2',
        '10 Daniel went to the garden.',
    ],
    2: [
        '1 John journeyed to the bathroom.',
        '2 Daniel moved to the garden.',
        '3 Daniel got the apple there.',
        '4 Daniel journeyed to the office.',
        '5 Where is the apple?\toffice\t3 4',
        '6 Daniel discarded the apple.',
        '7 Daniel journeyed to the bathroom.',
        '8 Where is the apple?\toffice\t6 4',
        '9 Daniel journeyed to the garden.',
        '10 John travelled to the kitchen.',
    ],
    3: [
        '1 Mary went to the bedroom.',
        '2 John went to the bathroom.',
        '3 Daniel travelled to the bathroom.',
        '4 Sandra grabbed the football.',
        '5 John went to the office.',
        '6 John got the milk.',
        '7 John dropped the milk.',
        '8 Mary got the apple.',
        '9 Daniel journeyed to the garden.',
        '10 Sandra discarded the football.',
    ],
    6: [
        '1 Sandra journeyed to the bathroom.',
        '2 John moved to the garden.',
        '3 Is John in the garden?\tyes\t2',
        '4 Daniel went to the bedroom.',
        '5 Sandra moved to the hallway.',
        '6 Is John in the garden?\tyes\t2',
        '7 Daniel travelled to the hallway.',
        '8 Mary travelled to the garden.',
        '9 Is John in the kitchen?\tno\t2',
        '10 Sandra travelled to the garden.',
    ],
    7: [
        '1 Mary went back to the bedroom.',
        '2 Daniel journeyed to the garden.',
        '3 John went back to the garden.',
        '4 John journeyed to the bedroom.',
        '5 John travelled to the office.',
        '6 John went back to the bedroom.',
        '7 Sandra travelled to the hallway.',
        '8 Sandra journeyed to the bedroom.',
        '9 Mary got the football there.',
        '10 Daniel moved to the kitchen.',
    ],
    8: [
        '1 Sandra took the milk there.',
        '2 Sandra went to the garden.',
        '3 What is Sandra carrying?\tmilk\t1',
        '4 Sandra went to the bathroom.',
        '5 Sandra discarded the milk.',
        '6 What is Sandra carrying?\tnothing\t1 5',
        '7 Daniel took the football there.',
        '8 Daniel grabbed the apple there.',
        '9 What is Sandra carrying?\tnothing\t1 5',
        '10 Sandra took the milk there.',
    ],
    9: [
        '1 Mary is not in the office.',
        '2 John went back to the kitchen.',
        '3 Is John in the hallway?\tno\t2',
        '4 Daniel went to the office.',
        '5 John is in the hallway.',
        '6 Is Mary in the office?\tno\t1',
        '7 Mary is in the kitchen.',
        '8 Daniel journeyed to the kitchen.',
        '9 Is John in the kitchen?\tno\t5',
        '10 Sandra journeyed to the bedroom.',
    ],
    10: [
        '1 Bill went back to the bedroom.',
        '2 Fred went back to the office.',
        '3 Is Fred in the office?\tyes\t2',
        '4 Julie is in the park.',
        '5 Julie is in the office.',
        '6 Is Fred in the office?\tyes\t2',
        '7 Fred is either in the bedroom or the school.',
        '8 Mary is either in the office or the kitchen.',
        '9 Is Julie in the office?\tyes\t5',
        '10 Mary went back to the cinema.',
    ],
}


@pytest.mark.parametrize("task", TASKS)
def test_knobs_are_honoured_and_keep_solver_agreement(task):
    knobs = Knobs(questions=3, length=3, actors=6)
    stories = generate(task, 300, seed=2, knobs=knobs)
    assert check(task, stories) == []
    people = set((PEOPLE_10 if task == 10 else PEOPLE)[:6])
    for story in stories:
        assert len(story.questions) <= 3
        names = {parse(line).actor for line in story.facts}
        assert names <= people
        gap = 0
        for line in story.lines:
            if line.is_question:
                assert gap % 3 == 0 and gap > 0  # questions come only after whole chunks of three
                gap = 0
            else:
                gap += 1
    assert len(set.union(*({parse(line).actor for line in s.facts} for s in stories))) == 6


@pytest.mark.parametrize("task", TASKS)
def test_golden_first_story(task):
    story = generate(task, 10, seed=0)[0]
    assert [format_line(line, False) for line in story.lines[:10]] == GOLDEN[task]


@pytest.mark.parametrize("task", TASKS)
def test_support_in_range_and_in_reasoning_order(task):
    for story in generate(task, 500, seed=5):
        kinds = {}
        for line in story.lines:
            if not line.is_question:
                kinds[line.id] = parse(line)
                continue
            assert line.support and all(s in kinds for s in line.support)  # earlier facts only
            events = [kinds[s] for s in line.support]
            if task in (1, 6, 9, 10):
                assert len(events) == 1 and events[0].actor in line.text
            elif task == 2:  # the object's fact, then where its holder was
                assert [e.kind for e in events][1] == "at" and events[0].args[0] in line.text
            elif task == 3:  # the object's fact, the move to the named place, the move before it
                obj, place = re.fullmatch(r"Where was the (\w+) before the (\w+)\?", line.text).groups()
                assert events[0].args[0] == obj and events[1].args == (place,)
                assert [e.kind for e in events[1:]] == ["at", "at"] and line.support[2] < line.support[1]
            elif task == 7:
                assert list(line.support) == sorted(line.support)
            elif task == 8:  # grouped by object, each group in story order
                objects = [e.args[0] for e in events]
                groups = [o for i, o in enumerate(objects) if i == 0 or objects[i - 1] != o]
                assert len(groups) == len(set(groups))
                for o in set(objects):
                    ids = [s for s, e in zip(line.support, events) if e.args[0] == o]
                    assert ids == sorted(ids)


def _revisits(stories) -> float:
    """Task 3: share of questions naming a place the object came to from different places."""
    mixed = []
    for sample in samples(stories):
        obj, place = re.fullmatch(r"Where was the (\w+) before the (\w+)\?", sample.question.text).groups()
        trail = _object_trail([parse(f) for f in sample.facts], obj)
        mixed.append(len({trail[i - 1][0] for i in range(1, len(trail)) if trail[i][0] == place}) > 1)
    return sum(mixed) / len(mixed)


def test_task3_asks_about_revisits_as_often_as_official(babi_dir):
    """'Before the X' where the object came to X from different places is asked (and read
    at the latest visit, which the solver checks) as often as in the official files."""
    official = _revisits(load_split(babi_dir / "en", 3, "train") + load_split(babi_dir / "en", 3, "test"))
    assert abs(official - 0.2235) < 0.001  # 447 of 2000
    assert abs(_revisits(generate(3, 2000, seed=7)) - official) < 0.04


# Mean facts told before each question of the official qa3 train file, measured with
# `memnet stats ../shared/babi/en --task 3 --json` (facts_before_question_mean: 50.024; the test file: 50.968).
OFFICIAL_QA3_FACTS_BEFORE_QUESTION = 50.024


def test_task3_questions_come_as_late_as_official():
    """The memory a qa3 question is read against is as long as in the official file. One set of
    1000 questions varies by about 5% from seed to seed (47.2 to 54.0 over seeds 0-15), so the
    mean is taken over 5000."""
    found = mean(facts_before_questions(generate(3, 5000, seed=0)))
    assert abs(found / OFFICIAL_QA3_FACTS_BEFORE_QUESTION - 1) < 0.05


def test_official_qa3_facts_before_question_is_the_stated_constant(babi_dir):
    stories = load_split(babi_dir / "en", 3, "train")
    assert mean(facts_before_questions(stories)) == pytest.approx(OFFICIAL_QA3_FACTS_BEFORE_QUESTION, abs=0.001)


def test_counting_and_lists_reach_three_objects():
    answers = {line.answer for s in generate(8, 2000, seed=6) for line in s.questions}
    assert any(a.count(",") == 2 for a in answers) and "nothing" in answers
    assert "three" in {line.answer for s in generate(7, 2000, seed=6) for line in s.questions}


def _words(stories):
    vocab, answers, facts = set(), set(), 0
    for story in stories:
        facts += len(story.facts)
        for line in story.lines:
            vocab.update(tokenize(line.text))
            if line.is_question:
                answers.update(answer_words(line.answer))
    return vocab | answers, answers, facts / len(stories)


@pytest.mark.parametrize("task", TASKS)
def test_matches_official_vocabulary_answers_and_length(babi_dir, task):
    vocab, answers, facts = _words(generate(task, 1000, seed=0))
    official_vocab, official_answers, official_facts = _words(load_split(babi_dir / "en", task, "train"))
    assert vocab <= official_vocab and len(vocab) >= 0.95 * len(official_vocab)
    assert answers == official_answers
    assert abs(facts / official_facts - 1) < 0.1
