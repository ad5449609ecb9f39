"""What a bench job trains on (`memnet bench --train-on`): the --data set's own train and valid
files ("official"), stories of memnet's generator ("generated:N") and the --data set's test, or
both ("official+generated:N": the official train file and N generated questions as one training
set, the official valid and test files).

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

An official+generated job writes the --data set's train file followed by N generated training
questions (seed 100 k) as its train file, and copies --data's valid and test files: the epoch and
restart are chosen on the official valid split. Its record has "train_data": "official+generated",
"train_questions": N (the generated ones), no valid_questions (the valid split is the official
one), and the generator's seed and hash and the sha256 of the generated train file.
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
    """The official files (questions None), `questions` generated training questions per task, or
    (with `official`) both: the official train file and the generated questions, the official valid."""

    questions: int | None = None
    generator: str = ""  # sha256 of the generator's sources, for generated training
    official: bool = False  # with generated questions: the official train file too (and its valid)

    @property
    def generated(self) -> bool:
        return self.questions is not None

    @property
    def valid_questions(self) -> int:
        return max(1, (self.questions or 0) // 10)

    @property
    def kind(self) -> str:
        """The record's train_data: official, generated or official+generated."""
        return ("official+generated" if self.official else "generated") if self.generated else "official"

    @property
    def label(self) -> str:
        """What keys a record besides (preset, data, task, set): official, generated:N:HASH12 or
        official+generated:N:HASH12."""
        return f"{self.kind}:{self.questions}:{self.generator[:12]}" if self.generated else "official"

    @property
    def says(self) -> str:
        """What trained the jobs, for the bench's first line ("" for the official files)."""
        if not self.generated:
            return ""
        return f", trained on {'the official train file and ' * self.official}{self.questions} generated questions per task"


def parse(text: str) -> TrainOn:
    """--train-on: official, generated[:N] or official+generated[:N] (N = 1000 by default)."""
    kind, sep, n = text.partition(":")
    if kind == "official" and not sep:
        return TrainOn()
    if kind in ("generated", "official+generated") and (not sep or (n.isdigit() and int(n) >= 1)):
        return TrainOn(int(n) if sep else GENERATED, generator_hash(), official=kind == "official+generated")
    raise MemnetError(f"--train-on: expected official, generated[:N] or official+generated[:N] (N >= 1 generated "
                      f"training questions per task), found {text!r}")


def generator_hash() -> str:
    """sha256 over the generator package's Python files (their paths and bytes), in path order."""
    digest = hashlib.sha256()
    for path in sorted(GENERATOR.rglob("*.py")):
        digest.update(path.relative_to(GENERATOR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def label(record: dict[str, Any]) -> str:
    """A record's TrainOn.label (records written before --train-on were trained on the official files)."""
    kind = record.get("train_data", "official")
    if kind == "official":
        return "official"
    return f"{kind}:{record.get('train_questions')}:{str(record.get('generator_hash'))[:12]}"


def test_file(data: str, task: int) -> Path:
    """--data's test file of `task`, which generated training is tested on."""
    test = babi.find_task_file(data, task, "test")
    if test is None:
        raise MemnetError(f"{data}: no test file of task {task} (expected {babi.task_filename(task, 'test')} "
                          f"or qa{task}_test.txt) to test the generated training on")
    return test


def official_files(data: str, task: int) -> tuple[Path, Path]:
    """--data's train and valid files of `task`, which official+generated training reads."""
    found = [babi.find_task_file(data, task, split) for split in ("train", "valid")]
    for split, path in zip(("train", "valid"), found):
        if path is None:
            raise MemnetError(f"{data}: no {split} file of task {task} (expected {babi.task_filename(task, split)} "
                              f"or qa{task}_{split}.txt): official+generated training reads the official train and "
                              f"valid files (en-valid has both)")
    return found[0], found[1]


def folder(train_on: TrainOn, data: str, task: int, seed: int, tmp: Path) -> tuple[str, dict[str, Any]]:
    """The folder a job trains from and the record's fields that say what trained it: the --data
    folder itself, or `tmp` holding the generated train and valid files and --data's test file
    (or, official+generated, the official and generated train file and --data's valid and test)."""
    if not train_on.generated:
        return data, {"train_data": "official"}
    test = test_file(data, task)
    if train_on.official:
        return str(tmp), mixed(train_on, data, task, seed, tmp, test)
    written = generator.write_dataset(tmp, task, train=train_on.questions, test=0, seed=seed,
                                      valid=train_on.valid_questions)
    shutil.copyfile(test, tmp / babi.task_filename(task, "test"))
    digest = hashlib.sha256()
    for path in written:  # train, then valid
        digest.update(path.read_bytes())
    return str(tmp), {"train_data": "generated", "train_questions": train_on.questions,
                      "valid_questions": train_on.valid_questions, "generator_seed": seed,
                      "generator_hash": train_on.generator, "generated_sha256": digest.hexdigest()}


def mixed(train_on: TrainOn, data: str, task: int, seed: int, tmp: Path, test: Path) -> dict[str, Any]:
    """Write `tmp`'s train file (the official train file, then the generated questions: each story
    numbers its lines from 1, so the two join as one file), copy the official valid and test
    files; the record's fields."""
    official, valid = official_files(data, task)
    (tmp / "generated").mkdir()
    (written,) = generator.write_dataset(tmp / "generated", task, train=train_on.questions, test=0, seed=seed)
    generated = written.read_bytes()
    head = official.read_bytes()
    if head and not head.endswith(b"\n"):
        head += b"\n"
    (tmp / babi.task_filename(task, "train")).write_bytes(head + generated)
    shutil.copyfile(valid, tmp / babi.task_filename(task, "valid"))
    shutil.copyfile(test, tmp / babi.task_filename(task, "test"))
    shutil.rmtree(tmp / "generated")
    return {"train_data": train_on.kind, "train_questions": train_on.questions, "generator_seed": seed,
            "generator_hash": train_on.generator, "generated_sha256": hashlib.sha256(generated).hexdigest()}


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
