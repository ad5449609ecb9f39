"""The Python API: what the command line does, as functions for a notebook or a script.

    import memnet
    stories = memnet.generate(16, 200, seed=0, out="data")          # memnet generate
    questions = memnet.load_tasks("en-valid", 1, split="test")      # a set's name or a folder
    run = memnet.train("demo", data="data", task=16, train_epochs=5)  # memnet train -> Run
    model = memnet.load("runs/demo")                                # a run folder or its model.pt
    answer = model.answer(["Brian is a frog.", "Brian is yellow.", "Greg is a frog."],
                          "What color is Greg?")
    answer.answer, answer.probability, answer.table(), answer.plot()

Every function raises memnet.errors.MemnetError (ConfigError for a config) with the message
the command line prints. A model declines as `memnet ask` does, by the same code
(memnet.ask): the Answer then says so and why, instead of a guess. `generate` runs without
torch; the others load it when called.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from memnet import babi, config as config_module, generator, official
from memnet.babi import Sample, Story
from memnet.config import Config, ConfigError
from memnet.errors import MemnetError

if TYPE_CHECKING:
    import torch

    from memnet.data import Vocab
    from memnet.inspect import Table

SECTIONS = ("data", "model", "train")


def generate(task: int | str, n: int, seed: int = 0, split: str = "train", out: str | os.PathLike | None = None,
             **knobs: int) -> list[Story]:
    """`n` questions of `task` (1-20 or 'chain') from the generator, as whole stories: the same
    arguments give the same stories as `memnet generate --seed SEED` writes to its SPLIT file.
    With `out`, the stories are also written there in the official format and file name
    (OUT/qa16_basic-induction_train.txt), so that `train(data=out)` reads them. `knobs` are
    memnet.generator.Knobs' (questions, length, actors, distractors, hops); a knob the task does
    not take is refused as `memnet generate` refuses it."""
    task = _one_task(task, split)
    if out is not None and not os.fspath(out):  # Path('') is the current folder: files would land there unasked
        raise MemnetError("out: expected a folder, found an empty string (write '.' for the current folder)")
    if n < 1:
        raise MemnetError(f"n: expected at least 1 question, found {n}")
    names = [f.name for f in dataclasses.fields(generator.Knobs)]
    for name in knobs:
        if name not in names:
            raise MemnetError(f"{name}: not a knob of the generator ({', '.join(names)})")
    stories = generator.generate(task, n, seed, split, generator.Knobs(**knobs))
    if out is not None:
        babi.write_file(Path(out) / babi.task_filename(task, split), stories, babi.space_before_tab(task))
    return stories


def load_tasks(name_or_dir: str | os.PathLike, task: int | str, split: str = "train",
               valid_fraction: float = 0.1) -> list[Sample]:
    """The questions of one task and split, each with the facts told before it, read from an
    official set's name (en-valid, after `memnet data download`) or a folder of bAbI files.
    A folder without a valid file gives the last `valid_fraction` of train as valid, as
    training does."""
    task = _one_task(task, split)
    folder = official.resolve_data_dir(os.fspath(name_or_dir))
    from memnet.inspect import load_samples  # torch: the valid split is carved as the trainer does it

    return load_samples(folder, task, split, valid_fraction)


def _one_task(task: int | str, split: str) -> babi.Task:
    """`task` as a task (a number, or 'chain'); MemnetError for a bad task, several, or a bad split."""
    if split not in babi.SPLITS:
        raise MemnetError(f"split: expected one of {', '.join(babi.SPLITS)}, found {split!r}")
    try:
        tasks = babi.parse_tasks(str(task))
    except ValueError as e:
        raise MemnetError(str(e)) from None
    if len(tasks) != 1:
        raise MemnetError(f"task: expected one task, found {task!r}")
    return tasks[0]


@dataclass
class Answer:
    """A model's answer to one question. `answer` is None when the model declined (`declined`,
    with the `reason`); `guess` is then what it would have said, where it ran at all."""

    question: str
    answer: str | None
    probability: float | None  # of the model's best answer (None: declined before the model ran)
    hops: int  # hops used (0: declined before the model ran)
    declined: bool
    reason: str = ""  # why it declined, as `memnet ask` says it
    notes: list[str] = field(default_factory=list)  # words read in another spelling, words ignored
    inspection: Table | None = field(default=None, repr=False)  # memnet inspect's attention table

    @property
    def guess(self) -> str | None:
        return self.inspection.prediction if self.inspection is not None else None

    def rows(self) -> list[dict[str, Any]]:
        """The per-hop attention, one dict per memory in story order: id, sentence, and the
        weight of each hop taken ('hop 1', ...); then, as in `memnet inspect`'s table, the null
        memory's weights (id None, sentence '(nothing)') where a hop put some on it. Empty when
        the model did not run."""
        t = self.inspection
        if t is None:
            return []
        hops = [f"{t.step} {k + 1}" for k in range(t.hops_used)]
        rows = [{"id": line_id, "sentence": text, **{h: t.attention[k][row] for k, h in enumerate(hops)}}
                for row, (line_id, text) in enumerate(t.memories)]
        if t.reads_nothing:
            rows.append({"id": None, "sentence": "(nothing)", **{h: t.nothing[k] for k, h in enumerate(hops)}})
        return rows

    def table(self):
        """The per-hop attention as a pandas DataFrame where pandas is installed, else `rows()`."""
        rows = self.rows()
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows, columns=list(rows[0]) if rows else ["id", "sentence"])

    def plot(self, path: str | os.PathLike | None = None):
        """The attention heat map of `memnet inspect --format png` as a matplotlib Figure, also
        written to `path` as a png when given."""
        if self.inspection is None:
            raise MemnetError(f"nothing to draw: cannot answer: {self.reason}")
        from memnet import inspect

        return inspect.heatmap(self.inspection, path) if path is not None else inspect.heatmap_figure(self.inspection)

    def __str__(self) -> str:
        """What `memnet ask` prints: its notes, then the attention table or why it declined."""
        notes = "".join(f"note: {note}\n" for note in self.notes)
        if self.inspection is None:
            return f"{notes}Q: {self.question}\ncannot answer: {self.reason}\n"
        from memnet.inspect import render

        return notes + render([self.inspection], "text")


class Model:
    """A trained model with its config and vocabulary (what a checkpoint holds)."""

    def __init__(self, module: torch.nn.Module, config: Config, vocab: Vocab, path: Path | None = None,
                 checkpoint: dict[str, Any] | None = None):
        self.module, self.config, self.vocab, self.path = module, config, vocab, path
        self.checkpoint = checkpoint or {}

    def __repr__(self) -> str:
        m = self.config.model
        return f"Model({self.config.model.type}, task {self.config.data.task}, d={getattr(m, 'dim', '?')}, " \
               f"hops={getattr(m, 'hops', '?')}{f', {self.path}' if self.path else ''})"

    def answer(self, story: str | Sequence[str] | Sample, question: str | None = None, *,
               min_probability: float = 0.5) -> Answer:
        """Answer `question` about `story`: a multi-line string or a list of sentences (leading
        line numbers and blank lines are dropped), or a Sample of load_tasks (then without
        `question`; its gold answer shows in the table). Declined, with the reason, as `memnet
        ask` declines: a question of a form never seen in training, about a name the story
        never mentions, with a word never seen, or whose answer has p under `min_probability`.
        MemnetError where the story or question is malformed (a question among the sentences)."""
        from memnet import ask

        if isinstance(story, Sample):
            if question is not None:
                raise MemnetError("question: a Sample holds its own question; "
                                  "give the story as sentences to ask another")
            sample = story
        else:
            if not isinstance(question, str):
                raise MemnetError(f"question: expected a string, found {type(question).__name__}")
            sample = ask.typed_sample(story, question)
        notes: list[str] = []
        try:
            table = ask.answer(self.module, self.vocab, self.config, sample, min_probability=min_probability,
                               say=notes.append)
        except ask.CannotAnswer as e:
            return Answer(sample.question.text, None, None, 0, True, str(e).removeprefix("cannot answer: "), notes)
        notes += [f"the model never saw {w!r}; ignored" for w in table.unknown]
        table.declined = table.declined.replace("--min-probability", "min_probability")
        return Answer(table.question, None if table.declined else table.prediction, table.probability,
                      table.hops_used, bool(table.declined), table.declined, notes, table)


def load(path: str | os.PathLike) -> Model:
    """The model of a run folder (its model.pt) or of a checkpoint file."""
    from memnet import checkpoint
    from memnet.files import regular_file

    if not os.fspath(path):  # Path('') is the current folder
        raise MemnetError("expected a checkpoint file or a run folder, found an empty string")
    path = Path(path)
    if path.is_dir() and (path / "model.pt").exists():
        path = path / "model.pt"
    module, cfg, vocab, payload = checkpoint.load(regular_file(path, "a checkpoint file (RUN/model.pt)"))
    return Model(module, cfg, vocab, path, payload)


@dataclass
class Run:
    """What `train` returns: the final metrics (as the last line of metrics.jsonl), the chosen
    model (None when training stopped before one was chosen), and the run folder, if any."""

    metrics: dict[str, Any]
    model: Model | None
    config: Config
    path: Path | None = None

    @property
    def vocab(self) -> Vocab | None:
        return self.model.vocab if self.model is not None else None

    def answer(self, story: str | Sequence[str] | Sample, question: str | None = None, **kwargs: Any) -> Answer:
        """`Model.answer` of the run's model."""
        if self.model is None:
            raise MemnetError("the run chose no model (stopped during linear start): nothing can answer")
        return self.model.answer(story, question, **kwargs)


def train(config: str | os.PathLike | Config | None = "default", overrides: dict[str, Any] | None = None, *,
          data: str | os.PathLike | None = None, task: int | str | None = None, out: str | os.PathLike | None = None,
          force: bool = False, quiet: bool = False, **keys: Any) -> Run:
    """Train as `memnet train` does and return the Run. `config` is a preset's name (default,
    demo, paper, joint), a YAML file, a Config, or None for the built-in defaults. Fields are
    changed by dotted keys in `overrides` ({"model.hops": 4}) or as keywords, section_key
    (model_hops=4). `data` is a set's name or a folder (data.dir), `task` a task spec
    (data.task). With `out`, the run folder is written as by `memnet train --out` (refused
    when it holds another run, unless `force`); without, nothing is written. `quiet` drops
    the log lines."""
    from memnet.run import RunFolder
    from memnet.trainer import train as train_loop

    changes = dict(overrides or {})
    for key, value in keys.items():
        section, _, name = key.partition("_")
        if section not in SECTIONS or not name:
            fields = {s: {f.name for f in dataclasses.fields(getattr(Config(), s))} for s in SECTIONS}
            near = [f"{s}_{key}" for s in SECTIONS if key in fields[s]]
            raise ConfigError(f"{key}: expected a keyword section_key (data_, model_ or train_ and a field)"
                              + (f"; did you mean {near[0]}?" if near else ""))
        changes[f"{section}.{name}"] = value
    if data is not None:  # absolute: the checkpoint's data folder must resolve from any working directory
        changes["data.dir"] = str(Path(official.resolve_data_dir(str(data))).resolve())
        if not Path(changes["data.dir"]).is_dir():
            raise MemnetError(f"{data}: no such data folder")
    if task is not None:
        changes["data.task"] = str(task)
    source = None
    if isinstance(config, Config):
        cfg = config_module.apply_overrides(config, changes)
    else:
        try:
            source = config_module.find_preset(str(config)) if config is not None else None
        except ConfigError as e:
            raise ConfigError(str(e).removeprefix("--")) from None
        cfg = config_module.load(source, changes)
    run = RunFolder(out, force=force, config_source=source) if out is not None else None
    metrics = train_loop(cfg, run, progress=False, log=not quiet)
    module, saved, vocab = metrics.pop("model"), metrics.pop("saved"), metrics.pop("vocab")
    model = None
    if module is not None:  # the config the chosen restart trained with (train.restart_grid), as load() gives it
        model = Model(module.cpu().eval(), config_module.restart_config(cfg, metrics["best_seed"]), vocab, saved)
    return Run(metrics, model, cfg, Path(out) if out is not None else None)
