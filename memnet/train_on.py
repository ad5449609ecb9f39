"""What a bench job trains on (`memnet bench --train-on`): the --data set's own train and valid
files ("official"), or stories of memnet's generator ("generated:N") and the --data set's test.

A generated job of task t and seed set k writes, into a temporary folder that is deleted after
the run, N training and max(1, N // 10) validation questions of memnet.generator with seed 100 k
(train and valid are the generator's disjoint seed streams), and copies the --data set's test
file beside them. The run chooses its epoch and restart on that generated valid split: the
official train and valid files are never read. The data is a pure function of (t, N, k) and the
generator's code, so the record names all of them:

    "train_data": "generated", "train_questions": 1000, "valid_questions": 100,
    "generator_seed": 2000, "generator_hash": "<sha256 of memnet/generator/*.py>",
    "generated_sha256": "<sha256 of the written train and valid files>"

generator_hash tells records of different generators apart (bench keys and tables by it);
generated_sha256 is the exact data, for checking that a rerun made the same files.
"""
from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from memnet import babi, generator
from memnet.babi import Sample, tokenize
from memnet.data import Vocab, normalize_answer
from memnet.errors import MemnetError

GENERATED = 1000  # --train-on generated: training questions per task, as many as an official 1k file
GENERATOR = Path(generator.__file__).resolve().parent


@dataclass(frozen=True)
class TrainOn:
    """The official files (questions None) or `questions` generated training questions per task."""

    questions: int | None = None
    generator: str = ""  # sha256 of the generator's sources, for generated training

    @property
    def generated(self) -> bool:
        return self.questions is not None

    @property
    def valid_questions(self) -> int:
        return max(1, (self.questions or 0) // 10)

    @property
    def label(self) -> str:
        """What keys a record besides (preset, data, task, set): official, or generated:N:HASH12."""
        return f"generated:{self.questions}:{self.generator[:12]}" if self.generated else "official"


def parse(text: str) -> TrainOn:
    """--train-on: official, generated (1000 questions per task) or generated:N."""
    kind, sep, n = text.partition(":")
    if kind == "official" and not sep:
        return TrainOn()
    if kind == "generated" and (not sep or (n.isdigit() and int(n) >= 1)):
        return TrainOn(int(n) if sep else GENERATED, generator_hash())
    raise MemnetError(f"--train-on: expected official, generated or generated:N (N >= 1 training questions "
                      f"per task), found {text!r}")


def generator_hash() -> str:
    """sha256 over the generator package's Python files (their paths and bytes), in path order."""
    digest = hashlib.sha256()
    for path in sorted(GENERATOR.rglob("*.py")):
        digest.update(path.relative_to(GENERATOR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def label(record: dict[str, Any]) -> str:
    """A record's TrainOn.label (records written before --train-on were trained on the official files)."""
    if record.get("train_data", "official") == "official":
        return "official"
    return f"generated:{record.get('train_questions')}:{str(record.get('generator_hash'))[:12]}"


def test_file(data: str, task: int) -> Path:
    """--data's test file of `task`, which generated training is tested on."""
    test = babi.find_task_file(data, task, "test")
    if test is None:
        raise MemnetError(f"{data}: no test file of task {task} (expected {babi.task_filename(task, 'test')} "
                          f"or qa{task}_test.txt) to test the generated training on")
    return test


def folder(train_on: TrainOn, data: str, task: int, seed: int, tmp: Path) -> tuple[str, dict[str, Any]]:
    """The folder a job trains from and the record's fields that say what trained it: the --data
    folder itself, or `tmp` holding the generated train and valid files and --data's test file."""
    if not train_on.generated:
        return data, {"train_data": "official"}
    test = test_file(data, task)
    written = generator.write_dataset(tmp, task, train=train_on.questions, test=0, seed=seed,
                                      valid=train_on.valid_questions)
    shutil.copyfile(test, tmp / babi.task_filename(task, "test"))
    digest = hashlib.sha256()
    for path in written:  # train, then valid
        digest.update(path.read_bytes())
    return str(tmp), {"train_data": "generated", "train_questions": train_on.questions,
                      "valid_questions": train_on.valid_questions, "generator_seed": seed,
                      "generator_hash": train_on.generator, "generated_sha256": digest.hexdigest()}


def unseen(vocab: Vocab, test: Iterable[Sample]) -> dict[str, Any]:
    """What of the test the training never showed the model. test_unseen_answer: the share of test
    questions whose answer is no answer class (no model of this vocabulary can give it);
    test_unseen_word: the share with a word of the question or of a supporting fact that training
    never contained (it reads as <unk>, so the question may be unanswerable); unseen_words: every
    test word (facts, questions, answers) training never contained."""
    answers = words = n = 0
    texts: set[str] = set()  # the questions of a story share its facts: tokenize each text once
    for s in test:
        n += 1
        answers += normalize_answer(s.question.answer) not in vocab.answer_index
        read = (s.question, *(s.facts[p] for p in s.support_positions))
        words += any(w not in vocab.stoi for line in read for w in tokenize(line.text))
        texts.update(line.text for line in (*s.facts, s.question))
        texts.update(babi.answer_words(s.question.answer))
    everywhere = {w for t in texts for w in tokenize(t)}
    return {"test_unseen_answer": answers / n if n else None, "test_unseen_word": words / n if n else None,
            "unseen_words": sorted(w for w in everywhere if w not in vocab.stoi)}
