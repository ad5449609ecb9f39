"""Dataset statistics, and generated data held against the official files."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

from memnet.babi import SPLITS, Story, Task, answer_words, find_task_file, folder_tasks, read_file, tokenize
from memnet.safe import shown


@dataclass
class SplitStats:
    stories: int
    questions: int
    facts_mean: float  # sentences (facts) per story
    facts_max: int
    support_mean: float  # supporting facts per question
    before_question_mean: float  # facts told before each question (see facts_before_questions)
    vocab: set[str] = field(repr=False)
    answers: set[str] = field(repr=False)

    def to_dict(self) -> dict:
        return {"stories": self.stories, "questions": self.questions,
                "facts_per_story_mean": round(self.facts_mean, 3), "facts_per_story_max": self.facts_max,
                "support_per_question_mean": round(self.support_mean, 3),
                "facts_before_question_mean": round(self.before_question_mean, 3),
                "vocab_size": len(self.vocab), "answers": sorted(self.answers)}


def vocabulary(stories: list[Story]) -> set[str]:
    """Words of facts, questions and answers."""
    words: set[str] = set()
    for story in stories:
        for line in story.lines:
            words.update(tokenize(line.text))
            if line.is_question:
                words.update(answer_words(line.answer))
    return words


def facts_before_questions(stories: list[Story]) -> list[int]:
    """For each question, the facts told since its story began: the memory a model reads to
    answer it. Facts per story alone hides where the questions fall: qa3's five questions
    come after 30, 38, 48, 60 and 74 facts in the official train file (mean 50.0)."""
    counts = []
    for story in stories:
        told = 0
        for line in story.lines:
            if line.is_question:
                counts.append(told)
            else:
                told += 1
    return counts


def split_stats(stories: list[Story]) -> SplitStats:
    facts = [len(s.facts) for s in stories] or [0]
    questions = [q for s in stories for q in s.questions]
    return SplitStats(
        stories=len(stories), questions=len(questions),
        facts_mean=mean(facts), facts_max=max(facts),
        support_mean=mean(len(q.support) for q in questions) if questions else 0.0,
        before_question_mean=mean(facts_before_questions(stories)) if questions else 0.0,
        vocab=vocabulary(stories), answers={q.answer for q in questions})


def _key(story: Story) -> tuple:
    return tuple((line.text, line.answer) for line in story.lines)


def overlap(train: list[Story], test: list[Story]) -> int:
    """How many test stories also occur, line for line, in train."""
    seen = {_key(s) for s in train}
    return sum(_key(s) in seen for s in test)


def folder_stats(folder: str | Path, tasks: list[Task] | None = None) -> dict[Task, dict[str, SplitStats | int]]:
    """{task: {split: SplitStats, ..., 'overlap': test stories found in train}}."""
    out: dict[Task, dict] = {}
    for task in tasks or folder_tasks(folder):
        splits = {s: read_file(p) for s in SPLITS if (p := find_task_file(folder, task, s))}
        if not splits:
            continue
        out[task] = {s: split_stats(stories) for s, stories in splits.items()}
        if "train" in splits and "test" in splits:
            out[task]["overlap"] = overlap(splits["train"], splits["test"])
    return out


def to_json(stats: dict, other: dict | None = None) -> dict:
    def plain(task_stats: dict) -> dict:
        return {k: (v.to_dict() if isinstance(v, SplitStats) else v) for k, v in task_stats.items()}

    result = {"tasks": {str(t): plain(s) for t, s in stats.items()}}
    if other is not None:
        result["compare"] = {str(t): comparison(stats[t], other[t]) for t in stats if t in other}
    return result


def _diff(a: float, b: float) -> float:
    return (a - b) / b if b else 0.0


def comparison(ours: dict, theirs: dict) -> dict:
    """Train split of `ours` against `theirs`: vocabulary overlap, answer sets, story length."""
    a, b = ours.get("train"), theirs.get("train")
    if a is None or b is None:
        return {}
    return {
        "vocab_subset": a.vocab <= b.vocab,
        "vocab_coverage": len(a.vocab & b.vocab) / len(b.vocab) if b.vocab else 1.0,
        "vocab_extra": sorted(a.vocab - b.vocab),
        "vocab_missing": sorted(b.vocab - a.vocab),
        "same_answers": a.answers == b.answers,
        "facts_per_story": [round(a.facts_mean, 2), round(b.facts_mean, 2)],
        "facts_per_story_diff": _diff(a.facts_mean, b.facts_mean),
        "facts_before_question": [round(a.before_question_mean, 2), round(b.before_question_mean, 2)],
        "facts_before_question_diff": _diff(a.before_question_mean, b.before_question_mean),
        "questions_per_story": [round(a.questions / a.stories, 2), round(b.questions / b.stories, 2)],
    }


def format_table(stats: dict) -> str:
    header = "| task | split | stories | questions | facts/story (mean, max) | support/q | vocab | answers | test in train |"
    rows = [header, "|" + " --- |" * 9]
    for task, splits in stats.items():
        for split in SPLITS:
            s = splits.get(split)
            if s is None:
                continue
            answers = ", ".join(shown(a) for a in sorted(s.answers)[:6]) + (f" (+{len(s.answers) - 6})" if len(s.answers) > 6 else "")
            rows.append(f"| {task} | {split} | {s.stories} | {s.questions} | {s.facts_mean:.1f}, {s.facts_max} | "
                        f"{s.support_mean:.2f} | {len(s.vocab)} | {answers} | "
                        f"{splits.get('overlap', '') if split == 'test' else ''} |")
    return "\n".join(rows)


def format_comparison(ours: dict, theirs: dict) -> str:
    header = ("| task | questions | stories | facts/story | diff | facts before q | diff | questions/story | vocab | "
              "subset | coverage | same answers |")
    rows = [header, "|" + " --- |" * 12]
    for task in ours:
        if task not in theirs or "train" not in ours[task] or "train" not in theirs[task]:
            continue
        a, b, c = ours[task]["train"], theirs[task]["train"], comparison(ours[task], theirs[task])
        qs = c["questions_per_story"]
        rows.append(f"| {task} | {a.questions} / {b.questions} | {a.stories} / {b.stories} | "
                    f"{a.facts_mean:.1f} / {b.facts_mean:.1f} | {c['facts_per_story_diff']:+.1%} | "
                    f"{a.before_question_mean:.1f} / {b.before_question_mean:.1f} | "
                    f"{c['facts_before_question_diff']:+.1%} | "
                    f"{qs[0]:.1f} / {qs[1]:.1f} | {len(a.vocab)} / {len(b.vocab)} | "
                    f"{'yes' if c['vocab_subset'] else 'no: ' + ' '.join(c['vocab_extra'][:5])} | "
                    f"{c['vocab_coverage']:.1%} | {'yes' if c['same_answers'] else 'no'} |")
    return "\n".join(rows) + "\n\n(train splits; each cell: this folder / the compared folder)"
