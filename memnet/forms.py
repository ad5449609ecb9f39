"""Question forms: which questions a trained model has seen, so it can decline the others.

A model trained on "What color is Greg?" has never learned what "Where is Greg?" asks; it
still puts out a colour, with confidence. The form of a question is its words with the
entity names replaced by X, and the training questions' forms travel in the vocabulary:

    what color is greg / what color is lily        ->  what color is X
    who gave the apple to bill / ... the milk ...  ->  who gave the X to X

An entity is a word that the training questions show to be interchangeable: two questions
identical but for that one word ("greg" / "lily"). Function words never vary alone
("what color is greg" has no sibling "what color was greg"), so they stay. A new question
fits a form when it has as many words and each word equals the form's, or stands where the
form has X (any word, a name the model never saw included). A form that another one covers
is dropped.

Some of a form's X are names the story must mention: "what color is X" asks about someone the
story told of, and a model asked about Greg with no Greg in the story can only invent. Others
need not be: "is X in the X" may ask about a place the story never names (the answer is then
no), and "is the X X X the X X" about a relation (above) the story tells the other way round
(below). Which X are which is read off the training data, not listed by task: an X is
*mentioned* when every training question of the form has, at that place, a word of its own story.

    "what color is greg" after "Greg is a frog." ...     ->  what color is X: X at 3 mentioned
    "is john in the office" after "John went home." ...  ->  is X in the X: only 1 mentioned
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from memnet.babi import tokenize

SLOT = "X"


def question_forms(questions: Iterable[str]) -> list[str]:
    """The sorted forms of `questions` (question texts)."""
    questions = {tuple(tokenize(q)) for q in questions}
    fillers: dict[tuple, set[str]] = defaultdict(set)  # a question with one word blanked -> the words seen there
    for words in questions:
        for i, word in enumerate(words):
            fillers[(len(words), i, words[:i], words[i + 1:])].add(word)
    entities = {w for seen in fillers.values() if len(seen) > 1 for w in seen}
    forms = {" ".join(SLOT if w in entities else w for w in words) for words in questions}
    # "is the pink rectangle X the X X" says nothing that "is the X X X the X X" does not
    return sorted(f for f in forms if not any(g != f and fits(f, g) for g in forms))


def fits(question: str, form: str) -> bool:
    words, pattern = tokenize(question), form.split()
    return len(words) == len(pattern) and all(p == SLOT or p == w for w, p in zip(words, pattern))


def known_form(question: str, forms: Sequence[str]) -> str | None:
    """The first of `forms` that `question` fits, or None."""
    return next((f for f in forms if fits(question, f)), None)


def in_story(question: Sequence[str], story: set[str]) -> frozenset[int]:
    """Positions of the question's words (tokenize's) that the story holds."""
    return frozenset(i for i, w in enumerate(question) if w in story)


def mentioned(found: Mapping[tuple[str, ...], frozenset[int]], forms: Sequence[str]) -> dict[str, list[int]]:
    """{form: positions of its X that every training question of the form filled with a word of
    its story}; `found`: each training question's words -> the positions its stories held, in all
    of them (in_story, intersected over the question's samples)."""
    held: dict[str, set[int]] = {}
    for words, positions in found.items():
        form = known_form(" ".join(words), forms)
        if form is None:  # not a training question's form: nothing to learn from it
            continue
        held[form] = held.get(form, set(slots(form))) & positions
    return {form: sorted(held.get(form, ())) for form in forms}


def slots(form: str) -> list[int]:
    """Positions of the form's X."""
    return [i for i, p in enumerate(form.split()) if p == SLOT]
