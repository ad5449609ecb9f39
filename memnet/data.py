"""From bAbI samples to tensors: the vocabulary and the batch every model reads.

A question with the facts told before it (a memnet.babi.Sample) becomes one row of a Batch.
Memory is ordered most recent first and keeps the `memory_size` most recent facts:

    facts:   1 Lily is a frog.   2 Lily is green.   3 Greg is a frog.     question: What colour is Greg?
    slot:    2                   1                  0                     (slot 3.. are padding)

so slot i is also the fact's age, the index of its temporal encoding T(i). A supporting fact
that fell out of memory (older than `memory_size`) has slot -1: no hop can find it.

Batch fields (N questions, M memory slots, J words per sentence, Q words per question,
S supporting facts at most; word id 0 is padding, 1 is <unk>):

    story    (N, M, J) long   word ids of each memory sentence
    query    (N, Q)    long   word ids of the question
    length   (N,)      long   real memories per question: slots 0..length-1
    answer   (N,)      long   answer class (Vocab.answers), -1 when not among them
    support  (N, S)    long   memory slot of each supporting fact in reasoning order, -1 = none
    n_support (N,)     long   number of supporting facts the file names
    task     (N,)      long   task number (0 for the chain family)
    time     (N, M)    long   temporal index of each slot: its age; at training time random
                              noise (RN) inserts empty memories, which ages older slots

read_splits and encode_tasks turn a folder of bAbI files into the train, valid and test
Batches a run reads.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import torch

from memnet import babi
from memnet.babi import CHAIN, Sample, tokenize
from memnet.errors import MemnetError
from memnet.forms import in_story, mentioned as mentioned_slots, question_forms

PAD, UNK = "<pad>", "<unk>"


class Vocab:
    """Words (itos/stoi, id 0 = padding, 1 = unknown), answer classes (answer strings) and the
    forms of the training questions (memnet.forms: what the model can be asked)."""

    def __init__(self, itos: Sequence[str], answers: Sequence[str], forms: Sequence[str] | None = None,
                 mentioned: Mapping[str, Sequence[int]] | None = None):
        self.itos = list(itos)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.answers = list(answers)
        self.answer_index = {a: i for i, a in enumerate(self.answers)}
        # the training questions' forms (memnet.forms); None in checkpoints written before them
        self.forms = None if forms is None else list(forms)
        # {form: positions of the X the story must mention} (memnet.forms.mentioned); None in
        # checkpoints written before it
        self.mentioned = None if mentioned is None else {f: list(p) for f, p in mentioned.items()}

    @classmethod
    def build(cls, samples: Iterable[Sample], every_word: bool = False, phrases: bool = False) -> Vocab:
        """The words and answers of `samples`. With `every_word`, every word is also an answer
        class (the paper's softmax over the whole vocabulary), beside the answers seen. With
        `phrases`, an answer of several words ('n,e') is one more vocabulary word, so its class
        has its own row of W (as in the paper's code) instead of the sum of its words' rows, which
        cannot tell 'n,e' from 'e,n'; a story never contains it."""
        words, answers = set(), set()
        found: dict[tuple[str, ...], frozenset[int]] = {}  # question -> positions every story of it mentions
        told: dict[str, list[str]] = {}  # a fact's words: a story's questions share its facts
        for s in samples:
            story = set()
            for line in s.facts:
                if line.text not in told:
                    told[line.text] = tokenize(line.text)
                story.update(told[line.text])
            question = tuple(tokenize(s.question.text))
            words.update(story, question)
            here = in_story(question, story)
            found[question] = found[question] & here if question in found else here
            answer = normalize_answer(s.question.answer)
            answers.add(answer)
            words.update(answer.split(","))  # answer words are vocabulary words: W is tied to C^K
        multi = {a for a in answers if "," in a} if phrases else set()
        forms = question_forms(" ".join(q) for q in found)
        return cls([PAD, UNK, *sorted(words | multi)], sorted(answers | words if every_word else answers),
                   forms, mentioned_slots(found, forms))

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """Word ids of a sentence; unknown words become <unk> (see `unknown`)."""
        return [self.stoi.get(w, 1) for w in tokenize(text)]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.itos[i] for i in ids if i != 0)

    def unknown(self, samples: Iterable[Sample]) -> list[str]:
        """Words of `samples` the vocabulary does not know, sorted: report them, they read as <unk>."""
        return sorted({w for s in samples for line in (*s.facts, s.question)
                       for w in tokenize(line.text) if w not in self.stoi})

    def answer_words(self) -> list[list[int]]:
        """Word ids of each answer class: 'apple,football' -> [id(apple), id(football)], or
        [id('apple,football')] when the vocabulary holds the phrase as a word (see `build`)."""
        return [[self.stoi[a]] if a in self.stoi else [self.stoi.get(w, 1) for w in a.split(",")] for a in self.answers]

    def to_dict(self) -> dict:
        forms = {} if self.forms is None else {"question_forms": self.forms}
        if self.mentioned is not None:
            forms["mentioned"] = self.mentioned
        return {"itos": self.itos, "answers": self.answers, **forms}

    @classmethod
    def from_dict(cls, d: dict) -> Vocab:
        return cls(d["itos"], d["answers"], d.get("question_forms"), d.get("mentioned"))


def normalize_answer(answer: str) -> str:
    return ",".join(w.strip().lower() for w in answer.split(",") if w.strip())


@dataclass
class Batch:
    story: torch.Tensor
    query: torch.Tensor
    length: torch.Tensor
    answer: torch.Tensor
    support: torch.Tensor
    n_support: torch.Tensor
    task: torch.Tensor
    time: torch.Tensor

    def __len__(self) -> int:
        return self.query.shape[-2]

    def index(self, idx: torch.Tensor | slice) -> Batch:
        """Rows `idx` (a slice, or a 1-d tensor of row numbers) of every field."""
        if isinstance(idx, torch.Tensor):  # index_select copies rows far faster than advanced indexing
            return Batch(*(t.index_select(0, idx) for t in self._fields()))
        return Batch(*(t[idx] for t in self._fields()))

    def split(self, size: int) -> list[Batch]:
        """Consecutive batches of `size` questions: views, made at once for all."""
        return [Batch(*fields) for fields in zip(*(t.split(size) for t in self._fields()))]

    def trim(self) -> Batch:
        """Drop memory slots and word columns that are padding in every row (cheaper steps)."""
        m = max(int(self.length.max()), 1)
        j = max(int((self.story[..., :m, :] != 0).sum(-1).max()), 1)
        q = max(int((self.query != 0).sum(-1).max()), 1)
        return dataclasses.replace(self, story=self.story[..., :m, :j], query=self.query[..., :q], time=self.time[..., :m])

    def trim_memory(self) -> Batch:
        """Drop the memory slots no row of this batch fills: a step costs in proportion to them."""
        m = max(int(self.length.max()), 1)
        if m == self.story.shape[-2]:
            return self
        return dataclasses.replace(self, story=self.story[..., :m, :], time=self.time[..., :m])

    def facts(self, slots: int) -> torch.Tensor:
        """(N, slots) float: 1 where a memory slot holds one of the question's supporting facts."""
        facts = torch.zeros(self.support.shape[0], slots + 1, device=self.support.device)  # the last takes the -1s
        facts.scatter_(1, self.support.masked_fill(self.support < 0, slots), 1.0)
        return facts[:, :slots]

    def to(self, device: str | torch.device) -> Batch:
        return Batch(*(t.to(device) for t in self._fields()))

    def _fields(self) -> list[torch.Tensor]:
        return [getattr(self, f.name) for f in dataclasses.fields(self)]


def encode_samples(samples: Sequence[Sample], vocab: Vocab, memory_size: int, task: int | str = 0) -> Batch:
    """Tensors for any list of samples (files, generated data or a hand-written story)."""
    n = len(samples)
    memories = [s.facts[-memory_size:][::-1] for s in samples]  # most recent first
    encoded: dict[str, list[int]] = {}  # the questions of a story share its sentences: encode each once

    def encode(text: str) -> list[int]:
        if text not in encoded:
            encoded[text] = vocab.encode(text)
        return encoded[text]

    sentences = [[encode(f.text) for f in mem] for mem in memories]
    queries = [encode(s.question.text) for s in samples]
    m = max([len(mem) for mem in memories] + [1])
    j = max([len(w) for sent in sentences for w in sent] + [1])
    q = max([len(w) for w in queries] + [1])
    s_max = max([len(s.question.support) for s in samples] + [1])

    # padded Python lists, then one tensor each: a per-row torch call would dominate loading
    story = [[w + [0] * (j - len(w)) for w in sent] + [[0] * j] * (m - len(sent)) for sent in sentences]
    query = [w + [0] * (q - len(w)) for w in queries]
    support = []
    for sample in samples:
        n_facts = len(sample.facts)
        slots = [n_facts - 1 - p for p in sample.support_positions]  # fact position -> memory slot
        slots = [slot if slot < memory_size else -1 for slot in slots]  # fell out of memory
        support.append(slots + [-1] * (s_max - len(slots)))
    return Batch(
        story=torch.tensor(story, dtype=torch.long).view(n, m, j),
        query=torch.tensor(query, dtype=torch.long).view(n, q),
        length=torch.tensor([len(mem) for mem in memories], dtype=torch.long),
        answer=torch.tensor([vocab.answer_index.get(normalize_answer(s.question.answer), -1) for s in samples],
                            dtype=torch.long),
        support=torch.tensor(support, dtype=torch.long).view(n, s_max),
        n_support=torch.tensor([len(s.question.support) for s in samples], dtype=torch.long),
        task=torch.full((n,), task_number(task), dtype=torch.long),
        time=torch.arange(m).expand(n, m).clone(),
    )


def concat(batches: Sequence[Batch]) -> Batch:
    """One batch of all rows, padded to the largest memory and sentence sizes."""
    m = max(b.story.shape[1] for b in batches)
    j = max(b.story.shape[2] for b in batches)
    q = max(b.query.shape[1] for b in batches)
    s = max(b.support.shape[1] for b in batches)

    def pad(t: torch.Tensor, *size: int, value: int = 0) -> torch.Tensor:
        out = torch.full((t.shape[0], *size), value, dtype=t.dtype)
        out[tuple(slice(0, n) for n in t.shape)] = t
        return out

    return Batch(
        story=torch.cat([pad(b.story, m, j) for b in batches]),
        query=torch.cat([pad(b.query, q) for b in batches]),
        length=torch.cat([b.length for b in batches]),
        answer=torch.cat([b.answer for b in batches]),
        support=torch.cat([pad(b.support, s, value=-1) for b in batches]),
        n_support=torch.cat([b.n_support for b in batches]),
        task=torch.cat([b.task for b in batches]),
        time=torch.arange(m).expand(sum(len(b) for b in batches), m).clone(),
    )


def task_number(task: int | str) -> int:
    return 0 if task == CHAIN else int(task)


def read_splits(folder: str | Path, tasks: list[babi.Task], valid_fraction: float = 0.1) -> dict[str, dict]:
    """{split: {task: [Sample]}} for train, valid and test. Without a valid file, the last
    `valid_fraction` of train's stories (in a fixed shuffled order) become validation. A task
    without a test file has no test questions; a test file without questions is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MemnetError(f"{folder}: no such data folder")
    splits: dict[str, dict] = {"train": {}, "valid": {}, "test": {}}
    for task in tasks:
        train = split_stories(folder, task, "train", "a run needs them (memnet generate writes a data set)")
        if babi.find_task_file(folder, task, "valid"):
            valid = split_stories(folder, task, "valid", "remove it to hold out data.valid_fraction of train instead")
        else:
            train, valid = _carve(train, valid_fraction, babi.find_task_file(folder, task, "train"), task)
        splits["train"][task] = list(babi.samples(train))
        splits["valid"][task] = list(babi.samples(valid))
        test = babi.find_task_file(folder, task, "test") is not None
        splits["test"][task] = list(babi.samples(split_stories(folder, task, "test", "remove it to go without a "
                                                               "test split"))) if test else []
    return splits


def _carve(train: list[babi.Story], valid_fraction: float, path: Path, task: babi.Task) -> tuple[list, list]:
    """(train, valid): the last `valid_fraction` of the stories, in a fixed shuffled order, as
    valid; MemnetError naming the file when either part would hold no question."""
    order = list(range(len(train)))
    random.Random(0).shuffle(order)
    cut = len(train) - max(1, round(len(train) * valid_fraction))
    valid = [train[i] for i in sorted(order[cut:])]
    kept = [train[i] for i in sorted(order[:cut])]
    if not any(story.questions for story in kept) or not any(story.questions for story in valid):
        n = sum(bool(story.questions) for story in train)
        raise MemnetError(f"{path}: expected enough stories of task {task} to split into train and valid "
                          f"(data.valid_fraction {valid_fraction}), found {n} with questions; "
                          f"add stories, or a valid file beside it")
    return kept, valid


def split_stories(folder: str | Path, task: babi.Task, split: str, way_out: str = "") -> list[babi.Story]:
    """The stories of one split's file, which must hold questions: a file without any is named,
    with what it holds and `way_out`, rather than found out later as a run or a table with no
    questions."""
    stories = babi.load_split(folder, task, split)
    if not any(story.questions for story in stories):
        path = babi.find_task_file(folder, task, split)
        found = "an empty file" if not stories else "no question in it"
        raise MemnetError(f"{path}: expected the {split} questions of task {task}, found {found}"
                          + (f"; {way_out}" if way_out else ""))
    return stories


def encode_tasks(samples_by_task: dict, vocab: Vocab, memory_size: int) -> Batch | None:
    """One Batch of every task's samples (None when there are none)."""
    parts = [encode_samples(s, vocab, memory_size, task=t) for t, s in samples_by_task.items() if s]
    return concat(parts) if parts else None


def task_name(number: int) -> str:
    """The task's name in tables and JSON: 'chain' for 0 (see `task_number`), else the number."""
    return CHAIN if number == 0 else str(number)
