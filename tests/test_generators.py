"""Contracts every task's generator keeps, checked by the text-only solver.

Task-specific behaviour (knobs, golden stories, question mixes) is tested beside each
generator module: test_locations.py, test_narratives.py, test_relations.py, test_categories.py.
"""
import random

import pytest

from memnet.babi import CHAIN, format_stories, load_split
from memnet.generator import GENERATORS, HONOURS, KNOB_NAMES, KnobError, Knobs, available_tasks, generate
from memnet.solver import check

TASKS = [*range(1, 21), CHAIN]

# Official train questions the solver disagrees with, as measured (docs/generator.md: "Generate, show,
# check"); a solver regression raises these counts, and one that stops checking something lowers them.
OFFICIAL_DISAGREEMENTS = {5: 2, 18: 60}


@pytest.mark.parametrize("task", TASKS)
def test_solver_agrees_with_generator(task):
    stories = generate(task, 3000, seed=1)
    assert sum(len(s.questions) for s in stories) == 3000
    assert check(task, stories) == []


@pytest.mark.parametrize("task", TASKS)
def test_same_seed_same_stories_other_seed_differs(task):
    a, b, c = (format_stories(generate(task, 200, seed)) for seed in (7, 7, 8))
    assert a == b
    assert a != c


@pytest.mark.parametrize("task", range(1, 21))
def test_solver_on_the_official_train_file(babi_dir, task):
    found = check(task, load_split(babi_dir / "en", task, "train"))
    assert len(found) == OFFICIAL_DISAGREEMENTS.get(task, 0)  # exactly: "at most" passes a solver checking nothing
    if task == 18:  # which facts are cited, never the answer
        assert all(d.kind == "support" for d in found)


# ---------------------------------------------------------------------------- knobs each task declares

LOADED = available_tasks()  # imports the task modules: their registration fills HONOURS
DECLARED = [(task, name) for task in TASKS for name in KNOB_NAMES if name in HONOURS[task]]
UNDECLARED = [(task, name) for task in TASKS for name in KNOB_NAMES if name not in HONOURS[task]]


def test_every_task_declares_its_knobs_and_every_knob_has_a_task():
    assert set(HONOURS) == set(LOADED) == set(TASKS)
    assert {name for knobs in HONOURS.values() for name in knobs} == set(KNOB_NAMES)


@pytest.mark.parametrize("task, name", DECLARED, ids=[f"{t}-{n}" for t, n in DECLARED])
def test_a_declared_knob_changes_the_stories(task, name):
    """A declaration claiming a knob the task does not read would make that knob a silent no-op."""
    plain = format_stories(generate(task, 20, seed=3))
    accepted = []
    for value in (1, 2, 3, 4):  # the first the task accepts may be its default (or read the same: 11's length 1 and 2)
        try:
            changed = format_stories(generate(task, 20, seed=3, knobs=Knobs(**{name: value})))
        except KnobError:
            continue
        accepted.append(value)
        if changed != plain:
            return
    pytest.fail(f"task {task}: {name} = {accepted} all give the stories of the default")


@pytest.mark.parametrize("task, name", UNDECLARED, ids=[f"{t}-{n}" for t, n in UNDECLARED])
def test_an_undeclared_knob_is_refused_and_unread(task, name):
    with pytest.raises(KnobError, match=f"^{name}: task {task}\\b.* takes no {name}; its knobs? (is|are) "):
        generate(task, 5, seed=0, knobs=Knobs(**{name: 2}))
    for seed in range(3):  # past the refusal, the story function itself never reads it: the declaration is complete
        told = [GENERATORS[task](random.Random(seed), knobs) for knobs in (Knobs(), Knobs(**{name: 2}))]
        assert told[0] == told[1]
