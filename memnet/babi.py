"""The bAbI text format: reading, writing and naming task files.

A file is a sequence of stories. Line ids restart at 1 for each story. A fact line is
``ID text``; a question line is ``ID question<TAB>answer<TAB>supporting ids``, where the
answer's words are joined by commas (``apple,football``) and the supporting ids are in
reasoning order. The official files put a space before the first tab of most question
lines; we keep that form when writing so a generated folder can stand in for ``en/``:

    1 Brian is a frog.
    2 Lily is gray.
    3 What colour is Brian? \tgray\t1

Both folder layouts are read: ``qa16_basic-induction_train.txt`` (en/, and what
``memnet generate`` writes) and ``qa16_train.txt`` / ``qa16_valid.txt`` (en-valid/).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from memnet.errors import MemnetError
from memnet.files import atomic_open, kind

TASK_NAMES = {
    1: "single-supporting-fact",
    2: "two-supporting-facts",
    3: "three-supporting-facts",
    4: "two-arg-relations",
    5: "three-arg-relations",
    6: "yes-no-questions",
    7: "counting",
    8: "lists-sets",
    9: "simple-negation",
    10: "indefinite-knowledge",
    11: "basic-coreference",
    12: "conjunction",
    13: "compound-coreference",
    14: "time-reasoning",
    15: "basic-deduction",
    16: "basic-induction",
    17: "positional-reasoning",
    18: "size-reasoning",
    19: "path-finding",
    20: "agents-motivations",
}
CHAIN = "chain"  # memnet's own task family: questions that need 1..K hops
SPLITS = ("train", "valid", "test")

Task = int | str  # 1..20, or CHAIN


class BabiFormatError(MemnetError):
    """A file that is not valid bAbI: names the file, the line, what was expected and found."""

    def __init__(self, path: str | os.PathLike | None, lineno: int | None, expected: str, found: str,
                 message: str | None = None):
        self.path, self.lineno, self.expected, self.found = path, lineno, expected, found
        where = str(path) if path is not None else "<input>"
        if lineno is not None:
            where += f":{lineno}"
        super().__init__(f"{where}: {message or f'expected {expected}, found {found}'}")


def spaces_for_tabs(path: str | os.PathLike | None, lineno: int | None, text: str) -> BabiFormatError:
    """The error for a question line whose answer and supporting ids follow it after spaces:
    read as written, it would be a fact (no tab) or a question without supporting ids."""
    return BabiFormatError(path, lineno, TAB_FIELDS, "spaces", f"a question line's fields are separated by tabs; "
                           f"found spaces in {_show(text)} (expected {TAB_FIELDS})")


def spaced_question(text: str) -> bool:
    """'What color is Greg? yellow 5 1 3': a question line, its answer and supporting ids after
    spaces, with no tab."""
    return "\t" not in text and _SPACED.fullmatch(text.strip()) is not None


TAB_FIELDS = "question<TAB>answer<TAB>supporting ids"
_SPACED = re.compile(r"[^?]*\? +[^\s?]+( +\d+)+")


@dataclass(frozen=True)
class Line:
    """One story line: a fact (answer is None) or a question with answer and supporting ids."""

    id: int
    text: str
    answer: str | None = None
    support: tuple[int, ...] = ()

    @property
    def is_question(self) -> bool:
        return self.answer is not None


@dataclass
class Story:
    lines: list[Line] = field(default_factory=list)

    @property
    def facts(self) -> list[Line]:
        return [line for line in self.lines if not line.is_question]

    @property
    def questions(self) -> list[Line]:
        return [line for line in self.lines if line.is_question]


@dataclass(frozen=True)
class Sample:
    """One question with the facts told before it: what a QA model sees."""

    facts: tuple[Line, ...]  # story facts before the question, in order
    question: Line

    @property
    def support_positions(self) -> tuple[int, ...]:
        """Indices into `facts` of the supporting facts, in reasoning order."""
        index = {line.id: i for i, line in enumerate(self.facts)}
        return tuple(index[s] for s in self.question.support if s in index)


def samples(stories: Iterable[Story]) -> Iterator[Sample]:
    for story in stories:
        facts: list[Line] = []
        for line in story.lines:
            if line.is_question:
                yield Sample(tuple(facts), line)
            else:
                facts.append(line)


def tokenize(text: str) -> list[str]:
    """Lower-cased words without punctuation: 'What colour is Greg?' -> ['what', 'colour', 'is', 'greg']."""
    return _WORD.findall(text.lower())


def answer_words(answer: str) -> list[str]:
    """'apple,football' -> ['apple', 'football']."""
    return [w for w in answer.lower().split(",") if w]


_WORD = re.compile(r"[a-z0-9]+")

# ---------------------------------------------------------------------------- reading

_ID = re.compile(r"(\d+) (.*)")


def _show(text: str, limit: int = 60) -> str:
    """`text` quoted for a message, cut after `limit` characters (a line can be megabytes long)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_lines(lines: Iterable[str], path: str | os.PathLike | None = None) -> list[Story]:
    """Parse bAbI lines (without or with trailing newlines) into stories.

    Raises BabiFormatError on the first line that breaks the format.
    """
    stories: list[Story] = []
    story: Story | None = None
    kinds: dict[int, bool] = {}  # id -> is_question, for the current story
    for lineno, raw in enumerate(lines, start=1):
        text = raw.rstrip("\r\n")
        if not text.strip():
            continue  # blank lines carry nothing; the official files have none
        m = _ID.fullmatch(text)
        if not m:
            raise BabiFormatError(path, lineno, "a line 'ID text' with an integer ID", _show(text))
        num, rest = int(m.group(1)), m.group(2)
        if num == 1:
            story = Story()
            stories.append(story)
            kinds = {}
        elif story is None:
            raise BabiFormatError(path, lineno, "a story starting at id 1", f"id {num}")
        elif num != story.lines[-1].id + 1:
            raise BabiFormatError(path, lineno, f"id {story.lines[-1].id + 1} (ids increase by one within a story)", f"id {num}")
        if spaced_question(rest):
            raise spaces_for_tabs(path, lineno, rest)
        if "\t" in rest:
            fields = rest.split("\t")
            if len(fields) == 2 and re.fullmatch(r"\S+( +\d+)+ *", fields[1]):  # 'Where is Mary?\tkitchen 1'
                raise spaces_for_tabs(path, lineno, rest)
            if len(fields) != 3:
                raise BabiFormatError(path, lineno, f"{TAB_FIELDS} (3 tab-separated fields)",
                                      f"{len(fields)} field(s) in {_show(rest)}")
            question, answer, support_text = fields
            question, answer = question.strip(), answer.strip()
            if not question:
                raise BabiFormatError(path, lineno, "a question before the first tab", "an empty question")
            if not answer:
                raise BabiFormatError(path, lineno, "a non-empty answer", "an empty answer")
            try:
                support = tuple(int(s) for s in support_text.split())
            except ValueError:
                raise BabiFormatError(path, lineno, "supporting ids as integers separated by spaces", _show(support_text)) from None
            for s in support:
                if s not in kinds:
                    raise BabiFormatError(path, lineno, f"supporting ids among the story's earlier lines 1..{num - 1}", f"id {s}")
                if kinds[s]:
                    raise BabiFormatError(path, lineno, "supporting ids that point at facts", f"id {s}, which is a question")
            line = Line(num, question, answer, support)
        else:
            if not rest.strip():
                raise BabiFormatError(path, lineno, "a sentence after the id", "nothing")
            line = Line(num, rest.strip())
        kinds[num] = line.is_question
        story.lines.append(line)
    return stories


def read_file(path: str | os.PathLike) -> list[Story]:
    found = kind(path)  # a folder, a FIFO or /dev/zero would be read forever or fail obscurely
    if found != "a regular file":
        raise BabiFormatError(path, None, "a regular file", found)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BabiFormatError(path, None, "a readable file", e.strerror or str(e)) from None
    return parse_bytes(data, path)


def parse_bytes(data: bytes, path: str | os.PathLike | None = None) -> list[Story]:
    """A file's bytes (UTF-8 text in the bAbI format) as stories; `path` names them in errors."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        lineno = data[: e.start].count(b"\n") + 1
        raise BabiFormatError(path, lineno, "UTF-8 text", f"byte 0x{data[e.start]:02x}") from None
    return parse_lines(text.split("\n"), path)


# ---------------------------------------------------------------------------- writing

# The official files put a space before a question's first tab, except in these tasks.
_NO_SPACE_BEFORE_TAB = {4, 15, 16, 17, 18, 19, 20, CHAIN}


def space_before_tab(task: Task) -> bool:
    return task not in _NO_SPACE_BEFORE_TAB


def format_line(line: Line, space: bool = True) -> str:
    if line.is_question:
        gap = " " if space else ""
        return f"{line.id} {line.text}{gap}\t{line.answer}\t{' '.join(map(str, line.support))}"
    return f"{line.id} {line.text}"


def format_stories(stories: Iterable[Story], space: bool = True) -> str:
    return "".join(format_line(line, space) + "\n" for story in stories for line in story.lines)


def write_file(path: str | os.PathLike, stories: Iterable[Story], space: bool = True) -> None:
    """Write stories atomically, one at a time (an iterator of stories is never held whole);
    `space` puts the official space before a question's tab."""
    with atomic_open(path) as f:
        for story in stories:
            f.write(format_stories([story], space))


# ---------------------------------------------------------------------------- tasks and files

def parse_tasks(spec: str) -> list[Task]:
    """'16' -> [16]; '1-20' -> [1..20]; '1,2,16' -> [1, 2, 16]; 'chain' -> ['chain']."""
    tasks: list[Task] = []
    for part in str(spec).split(","):
        part = part.strip().lower()
        if part == CHAIN:
            tasks.append(CHAIN)
            continue
        m = re.fullmatch(r"(?:qa)?(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"task: expected a number 1-20, a range like 1-20, a list like 1,2,16, or '{CHAIN}'; found {part!r}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if not (1 <= lo <= hi <= 20):
            raise ValueError(f"task: expected numbers between 1 and 20; found {part!r}")
        tasks.extend(range(lo, hi + 1))
    return tasks


def task_filename(task: Task, split: str) -> str:
    """The official file name: qa16_basic-induction_train.txt (chain_train.txt for the chain family)."""
    if task == CHAIN:
        return f"{CHAIN}_{split}.txt"
    return f"qa{task}_{TASK_NAMES[int(task)]}_{split}.txt"


def find_task_file(folder: str | os.PathLike, task: Task, split: str) -> Path | None:
    """The file of `task` and `split` in either layout, or None when the folder has none.
    Whatever stands under the name counts (a folder, a FIFO, a broken link): reading it then
    says what it is, where skipping it would hide it."""
    folder = Path(folder)
    names = [task_filename(task, split)]
    if task != CHAIN:
        names.append(f"qa{task}_{split}.txt")
    for name in names:
        if os.path.lexists(folder / name):
            return folder / name
    return None


def folder_tasks(folder: str | os.PathLike) -> list[Task]:
    """Tasks that have at least one split file in `folder`, in task order."""
    return [t for t in [*TASK_NAMES, CHAIN] if any(find_task_file(folder, t, s) for s in SPLITS)]


def load_split(folder: str | os.PathLike, task: Task, split: str) -> list[Story]:
    path = find_task_file(folder, task, split)
    if path is None:
        raise BabiFormatError(folder, None, f"a {split} file for task {task} ({task_filename(task, split)})", "no such file")
    return read_file(path)
