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
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

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
