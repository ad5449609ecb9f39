"""Per-hop attention of one question: which memory each hop read, and what the model answered.

`inspect_samples(model, vocab, cfg, samples)` runs a trained model on bAbI samples and returns
one Table per question; `render(table, fmt)` writes it as text, markdown, json or csv, and
`heatmap(table, path)` draws it as a png. A Table is in story order, one row per memory the
model saw and one column per hop it took:

    Q: What color is Greg?
      id  sentence          gold   hop 1   hop 2   hop 3
       1  Brian is a frog.     2    0.01  [0.95]   0.02
       3  Brian is yellow.     3    0.00    0.01  [0.93]
       5  Greg is a frog.      1  [0.97]   0.02    0.03

[x] is the hop's chosen memory (its argmax), ~x a memory masked because an earlier hop chose
it (model.masking), and the gold column the supporting fact's place in the reasoning order.
With a reader that sums its memories through gates (Result.gates), a last column, sum, shows each
memory's gate at the hop answered from: how much of it the sum counted. Only the Result interface is used (attention
(B, K, M), hops_used, halted, hop_logits, gates), so any model that honours it can be inspected.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from memnet import babi, registry, safe
from memnet.babi import BabiFormatError, Line, Sample, parse_lines, tokenize
from memnet.config import Config
from memnet.data import Vocab, encode_samples, normalize_answer
from memnet.errors import MemnetError
from memnet.data import read_splits, split_stories
from memnet.evaluation import predict
from memnet.files import atomic_write, read_text
from memnet.models import HALT_REASONS

FORMATS = ("text", "markdown", "json", "csv", "png")


@dataclass
class Table:
    question: str  # as written, unknown words included
    answer: str | None  # gold answer; None when the story gives none
    memories: list[tuple[int, str]]  # (line id, sentence) of each memory, oldest first
    attention: list[list[float]]  # [hop][memory] for the hops taken
    chosen: list[int | None]  # per hop taken: row (index into memories) of its argmax; None: every memory masked
    masked: list[list[int]]  # per hop taken: rows masked because an earlier hop chose them
    support: list[int]  # rows of the gold supporting facts in reasoning order (in memory only)
    prediction: str
    probability: float
    hops_used: int
    max_hops: int
    stop_reason: str  # "halted" (the halting unit stopped) or "max hops"
    hop_answers: list[tuple[str, float]]  # per hop taken: the answer had it stopped there
    unknown: list[str] = field(default_factory=list)  # words the model never saw, ignored
    forgotten: int = 0  # facts older than the memory size, not seen by the model
    label: str = ""  # where the question comes from, e.g. "test #12"
    step: str = "hop"  # what a column is: a memory network's hop, a transformer's layer (memnet.registry's step)
    nothing: list[float] = field(default_factory=list)  # per hop taken: weight on the null memory (reads nothing)
    heads: list[list[list[float]]] = field(default_factory=list)  # transformer, on request: [layer][head][memory]
    declined: str = ""  # why the model's answer is not to be trusted (memnet.ask), shown before it
    summed: list[float] = field(default_factory=list)  # a reader's gates (Result.gates): each memory's at the hop answered from
    readers: list[tuple[str, float]] = field(default_factory=list)  # a mixture of readers (Result.share): each one's share

    @property
    def reads_nothing(self) -> bool:
        """Some hop put a visible weight (0.005 or more) on the null memory."""
        return any(w >= 0.005 for w in self.nothing)

    @property
    def all_masked(self) -> list[int]:
        """The hops taken (0-based) that chose no memory: an earlier hop had chosen every one."""
        return [k for k, c in enumerate(self.chosen) if c is None]

    def all_masked_note(self) -> str:
        """'hop 3 chose no memory: every one was masked by an earlier hop' (empty when none)."""
        if not self.all_masked:
            return ""
        names = " and ".join(f"{self.step} {k + 1}" for k in self.all_masked)
        where = ", its weight went to the null memory" if self.reads_nothing else ""
        return f"{names} chose no memory: every one was masked by an earlier hop{where}"

    @property
    def correct(self) -> bool | None:
        return None if self.answer is None else normalize_answer(self.answer) == self.prediction

    def gold(self, row: int) -> int | None:
        """Place (1-based) of memory `row` in the gold reasoning order, or None."""
        return self.support.index(row) + 1 if row in self.support else None


# ---------------------------------------------------------------------------- running the model


def known_words_only(sample: Sample, vocab: Vocab) -> tuple[Sample, list[str]]:
    """The sample with words the model never saw removed (not mapped to <unk>: the model never
    learned <unk>, so it would add noise), and those words."""
    unknown = vocab.unknown([sample])

    def clean(line: Line) -> Line:
        return Line(line.id, " ".join(w for w in tokenize(line.text) if w in vocab.stoi), line.answer, line.support)

    if not sample.facts:
        raise MemnetError("the story has no sentences before the question")
    if not any(w in vocab.stoi for w in tokenize(sample.question.text)):
        raise MemnetError(f"the question {sample.question.text!r} has no word the model knows")
    return Sample(tuple(clean(f) for f in sample.facts), clean(sample.question)), unknown


@torch.no_grad()
def inspect_samples(model: torch.nn.Module, vocab: Vocab, cfg: Config, samples: Sequence[Sample],
                    labels: Sequence[str] | None = None, heads: bool = False) -> list[Table]:
    """One Table per sample, from one batched forward pass (in chunks). With `heads` (a
    transformer only), also the question's attention per layer and head: the Table's
    attention averages them."""
    cleaned = [known_words_only(s, vocab) for s in samples]
    memory_size = cfg.data.memory_size
    batch = encode_samples([c for c, _ in cleaned], vocab, memory_size)
    result = predict(model, batch)
    if heads:
        if not hasattr(model, "read"):
            raise MemnetError("--heads: a memory network has one attention per hop and no heads; "
                              "a transformer model has them")
        with torch.no_grad():
            per_head = model.read(batch).heads  # (N, L, H, M)
    masking = cfg.model.masking if cfg.model.type == "memn2n" else "off"  # a memory network's switch only
    null = cfg.model.type == "memn2n" and cfg.model.null_memory  # the rest of a hop's weight went to the null memory
    probs = result.logits.softmax(-1)  # (N, A)
    hop_probs = result.hop_logits.softmax(-1)  # (N, K, A)
    tables = []
    for r, sample in enumerate(samples):
        memory = sample.facts[-memory_size:]  # slot i is memory[len - 1 - i]
        n = len(memory)
        hops = int(result.hops_used[r])
        attention = result.attention[r, :hops, :n].flip(-1)  # (hops, n) oldest first
        # the model's argmax (memnet.models.parts.chosen: only above 0; a hop whose every memory was
        # masked chose none), on slots
        chosen = [n - 1 - int(result.attention[r, k, :n].argmax()) if n and float(result.attention[r, k, :n].max()) > 0
                  else None for k in range(hops)]
        rows = {line.id: i for i, line in enumerate(memory)}
        pred = int(probs[r].argmax())
        tables.append(Table(
            question=sample.question.text,
            answer=sample.question.answer or None,
            memories=[(line.id, line.text) for line in memory],
            attention=[[round(float(w), 6) for w in hop] for hop in attention],
            chosen=chosen,
            masked=[sorted({c for c in chosen[:k] if c is not None}) if masking != "off" else [] for k in range(hops)],
            support=[rows[s] for s in sample.question.support if s in rows],
            prediction=vocab.answers[pred],
            probability=float(probs[r, pred]),
            hops_used=hops,
            max_hops=result.attention.shape[1],
            stop_reason=HALT_REASONS[int(result.halted[r])],
            hop_answers=[(vocab.answers[int(hop_probs[r, k].argmax())], float(hop_probs[r, k].max())) for k in range(hops)],
            unknown=cleaned[r][1],
            forgotten=len(sample.facts) - n,
            label=labels[r] if labels is not None else "",
            step=registry.get(cfg.model.type).step,
            nothing=[round(max(0.0, 1.0 - float(result.attention[r, k].sum())), 6) if null else 0.0 for k in range(hops)],
            heads=[[[round(float(w), 6) for w in head[:n].flip(-1)] for head in per_head[r, k]] for k in range(hops)] if heads else [],
            summed=[round(float(g), 6) for g in result.gates[r, hops - 1, :n].flip(-1)] if result.gates is not None else [],
            readers=[(model.names[0], float(result.share[r])), (model.names[1], 1 - float(result.share[r]))]
            if result.share is not None else [],
        ))
    return tables


def read_story(path: str | os.PathLike) -> Sample:
    """A story file in bAbI format whose last line is the question; the question's answer and
    supporting ids are optional (`5 What color is Greg?` alone is fine)."""
    lines = read_text(path, "a story file").split("\n")  # blank lines kept: messages name the file's own line
    filled = [n for n, raw in enumerate(lines) if raw.strip()]
    if not filled:
        raise MemnetError(f"{path}: empty story file")
    end = filled[-1]  # the question's line (0-based)
    last = lines[end]
    has_answer = "\t" in last
    if not has_answer:
        if babi.spaced_question(last):
            parse_lines(lines[:end], path)  # an error above it comes first
            raise babi.spaces_for_tabs(path, end + 1, re.sub(r"^\d+\s+", "", last.strip()))
        if not last.rstrip().endswith("?"):
            raise MemnetError(f"{path}:{end + 1}: expected the story to end with a question ending in '?', "
                              f"found {babi._show(last)}")
        lines[end] = last.rstrip() + "\t?\t"  # a placeholder answer, dropped below
    try:
        story = parse_lines(lines, path)[-1]
    except BabiFormatError as e:
        if not has_answer and e.found == babi._show(lines[end]):  # shows the placeholder: show the line as written
            raise BabiFormatError(path, e.lineno, e.expected, babi._show(last.rstrip())) from None
        raise
    facts = tuple(line for line in story.lines[:-1] if not line.is_question)
    question = story.lines[-1]
    if not has_answer:
        question = Line(question.id, question.text, "", ())
    return Sample(facts, question)


def load_samples(folder: str | os.PathLike, task: int | str, split: str, valid_fraction: float = 0.1) -> list[Sample]:
    """The questions of one split, as the trainer splits them (valid carved out of train when
    the folder has no valid file)."""
    if not Path(folder).is_dir():
        raise MemnetError(f"{folder}: no such data folder")
    if split == "test":
        return list(babi.samples(split_stories(folder, task, "test", "--split valid reads another split")))
    return read_splits(folder, [task], valid_fraction)[split][task]


# ---------------------------------------------------------------------------- renderers


def _cell(table: Table, hop: int, row: int) -> tuple[str, str]:
    """(text, kind) of one cell; kind is chosen, masked or plain."""
    value = f"{table.attention[hop][row]:.2f}"
    if row == table.chosen[hop]:
        return f"[{value}]", "chosen"
    if row in table.masked[hop]:
        return f"~{value} ", "masked"
    return f" {value} ", "plain"


def _readers_line(table: Table) -> str:
    (a, share), (b, rest) = table.readers
    return (f"readers: {a} {share:.2f}, {b} {rest:.2f} (the answer mixes theirs; the {table.step}s shown are {a}'s)")


def _summary_lines(table: Table) -> list[str]:
    gold = table.answer if table.answer is not None else "(none given)"
    verdict = {True: "  correct", False: "  WRONG", None: ""}[table.correct]
    lines = [f"cannot answer: {table.declined}; its best guess:"] if table.declined else []
    lines += [f"answer: {table.prediction} (p={table.probability:.2f})   gold: {gold}{verdict}",
              f"{table.step}s used: {table.hops_used} of {table.max_hops} (stopped: {table.stop_reason})",
              "had it stopped after: " + "   ".join(f"{table.step} {k + 1}: {a} ({p:.2f})" for k, (a, p) in enumerate(table.hop_answers))]
    if table.readers:
        lines.append(_readers_line(table))
    if table.forgotten:
        lines.append(f"({table.forgotten} older sentence(s) fell out of the {len(table.memories)}-slot memory)")
    return lines


_ANSI = {"chosen": "\033[1;32m", "masked": "\033[2m", "gold": "\033[36m", "bad": "\033[31m", "good": "\033[32m",
         "reset": "\033[0m"}


def shown(table: Table, convert=safe.shown) -> Table:
    """The table with every text that comes from data (story, answers, label) passed through
    `convert`: a story file's terminal escapes are shown, never obeyed."""
    return dataclasses.replace(
        table, question=convert(table.question), answer=None if table.answer is None else convert(table.answer),
        memories=[(i, convert(t)) for i, t in table.memories], prediction=convert(table.prediction),
        hop_answers=[(convert(a), p) for a, p in table.hop_answers], unknown=[convert(w) for w in table.unknown],
        label=convert(table.label))


def render_text(table: Table, color: bool = False) -> str:
    table = shown(table)

    def paint(text: str, kind: str) -> str:
        return f"{_ANSI[kind]}{text}{_ANSI['reset']}" if color and kind in _ANSI else text

    id_w = max(2, *(len(str(i)) for i, _ in table.memories))
    text_w = max(8, *(len(t) for _, t in table.memories))
    header = f"{'id':>{id_w}}  {'sentence':<{text_w}}  gold" + "".join(f"  {table.step + ' ' + str(k + 1):>7}" for k in range(table.hops_used))
    header += f"  {'sum':>7}" if table.summed else ""
    out = [(table.label + "  " if table.label else "") + f"Q: {table.question}", header]
    for row, (line_id, sentence) in enumerate(table.memories):
        gold = table.gold(row)
        cells = "".join("  " + paint(f"{text:>7}", kind) for text, kind in (_cell(table, k, row) for k in range(table.hops_used)))
        cells += f"  {f' {table.summed[row]:.2f} ':>7}" if table.summed else ""
        out.append(f"{line_id:>{id_w}}  {sentence:<{text_w}}  " + paint(f"{gold if gold else '':>4}", "gold") + cells)
    if table.reads_nothing:
        out.append(f"{'':>{id_w}}  {'(nothing)':<{text_w}}      " + "".join(f"  {f' {w:.2f} ':>7}" for w in table.nothing))
    summary = _summary_lines(table)
    answer = 1 if table.declined else 0  # the line that names the answer
    if table.correct is not None:
        summary[answer] = paint(summary[answer], "good" if table.correct else "bad")
    out += summary
    if table.heads:
        out += ["per head (the columns above average them):",
                f"{'id':>{id_w}}  " + "".join(f"  {f'L{k + 1} H{h + 1}':>6}" for k, layer in enumerate(table.heads) for h in range(len(layer)))]
        for row, (line_id, _) in enumerate(table.memories):
            out.append(f"{line_id:>{id_w}}  " + "".join(f"  {head[row]:6.2f}" for layer in table.heads for head in layer))
    out.append(f"[x] chosen memory (argmax) of the {table.step}" + ("; ~x masked: chosen by an earlier hop" if any(table.masked) else "")
               + "; gold: place in the supporting facts' reasoning order"
               + ("; (nothing): the null memory, which reads nothing" if table.reads_nothing else "")
               + (f"; {table.all_masked_note()}" if table.all_masked else "")
               + (f"; sum: how much of each memory the summed read-out of {table.step} {table.hops_used} counted"
                  if table.summed else ""))
    return "\n".join(line.rstrip() for line in out) + "\n"




def render_markdown(table: Table) -> str:
    gold = table.answer if table.answer is not None else "none given"
    verdict = {True: " ✓", False: " ✗", None: ""}[table.correct]
    out = [f"cannot answer: {safe.markdown(table.declined)}; its best guess:", ""] if table.declined else []
    out += [f"**{safe.markdown(table.question)}** gold: {safe.markdown(gold)} · predicted: **{safe.markdown(table.prediction)}** "
            f"({table.probability:.2f}){verdict} · {table.hops_used} of {table.max_hops} {table.step}s ({table.stop_reason})", "",
            "| sentence | " + " | ".join(f"{table.step} {k + 1}" for k in range(table.hops_used)) + (" | sum" if table.summed else "") + " |",
            "| --- |" + " ---: |" * (table.hops_used + bool(table.summed))]
    for row, (line_id, sentence) in enumerate(table.memories):
        gold_mark = f" *(gold {table.gold(row)})*" if table.gold(row) else ""
        cells = []
        for k in range(table.hops_used):
            value = f"{table.attention[k][row]:.2f}"
            kind = _cell(table, k, row)[1]
            cells.append(f"**{value}**" if kind == "chosen" else f"~~{value}~~" if kind == "masked" else value)
        cells += [f"{table.summed[row]:.2f}"] if table.summed else []
        out.append(f"| {line_id} {safe.markdown(sentence)}{gold_mark} | " + " | ".join(cells) + " |")
    if table.reads_nothing:
        out.append("| *(nothing: the null memory)* | " + " | ".join(f"{w:.2f}" for w in table.nothing) + (" | " if table.summed else "") + " |")
    if table.heads:
        names = [f"L{k + 1} H{h + 1}" for k, layer in enumerate(table.heads) for h in range(len(layer))]
        out += ["", "| sentence | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
        out += [f"| {line_id} {safe.markdown(sentence)} | " + " | ".join(f"{head[row]:.2f}" for layer in table.heads for head in layer) + " |"
                for row, (line_id, sentence) in enumerate(table.memories)]
    out += ["", "had it stopped after: " + ", ".join(f"{table.step} {k + 1} → {safe.markdown(a)} ({p:.2f})"
                                                    for k, (a, p) in enumerate(table.hop_answers))]
    if table.all_masked:
        out += ["", f"~~x~~: masked, chosen by an earlier hop; {table.all_masked_note()}"]
    if table.readers:
        out += ["", _readers_line(table)]
    return "\n".join(out) + "\n"


def to_dict(table: Table) -> dict:
    """The JSON form: memories as {id, text, gold}, attention per hop taken (memory order),
    chosen and masked memories as line ids."""
    ids = [i for i, _ in table.memories]
    return {
        "label": table.label,
        "question": table.question,
        "answer": table.answer,
        "prediction": table.prediction,
        "probability": table.probability,
        "correct": table.correct,
        "cannot_answer": table.declined or None,
        "step": table.step,
        "hops_used": table.hops_used,
        "max_hops": table.max_hops,
        "stop_reason": table.stop_reason,
        "memories": [{"id": i, "text": t, "gold": table.gold(row)} for row, (i, t) in enumerate(table.memories)],
        "attention": table.attention,
        "nothing": table.nothing,
        **({"heads": table.heads} if table.heads else {}),
        **({"summed": table.summed} if table.summed else {}),
        **({"readers": [{"reader": name, "share": w} for name, w in table.readers]} if table.readers else {}),
        "chosen": [ids[row] if row is not None else None for row in table.chosen],
        "masked": [[ids[row] for row in hop] for hop in table.masked],
        "support": [ids[row] for row in table.support],
        "hop_answers": [{"hop": k + 1, "answer": a, "probability": p} for k, (a, p) in enumerate(table.hop_answers)],
        "unknown_words": table.unknown,
        "forgotten": table.forgotten,
    }


def render_csv(tables: Sequence[Table]) -> str:
    """One row per (question, memory): attention per hop (empty for hops not taken), the hops
    that chose it, its gold place."""
    hops = max(t.max_hops for t in tables)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["question", "id", "sentence", "gold", *(f"hop_{k + 1}" for k in range(hops)), "chosen_by_hops",
                     "prediction", "answer"])
    for n, t in enumerate(tables):
        for row, (line_id, sentence) in enumerate(t.memories):
            weights = [f"{t.attention[k][row]:.4f}" if k < t.hops_used else "" for k in range(hops)]
            chosen = " ".join(str(k + 1) for k in range(t.hops_used) if t.chosen[k] == row)
            writer.writerow([safe.csv_cell(cell) for cell in [t.label or n, line_id, sentence, t.gold(row) or "",
                                                              *weights, chosen, t.prediction, t.answer or ""]])
    return buffer.getvalue()


def render(tables: Sequence[Table], fmt: str, color: bool = False) -> str:
    """Several tables in one format (json: one object, or a list for several)."""
    if fmt == "text":
        return "\n".join(render_text(t, color) for t in tables)
    if fmt == "markdown":
        return "\n".join(render_markdown(t) for t in tables)
    if fmt == "json":
        data = [to_dict(t) for t in tables]
        return json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n"
    if fmt == "csv":
        return render_csv(tables)
    raise MemnetError(f"format: expected one of {', '.join(FORMATS)}, found {fmt!r}")


def use_color(stream=sys.stdout) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    return hasattr(stream, "isatty") and stream.isatty() and not os.environ.get("NO_COLOR")


PNG_TEXT = 60  # characters of a sentence (or a title) drawn in a png; longer ones are cut


CHOSEN_COLOUR = "#d62728"  # the box around a hop's chosen cell, and its mark in the legend


def heatmap_figure(table: Table):
    """The png heatmap's matplotlib Figure (not drawn yet): rows are sentences, columns hops, the
    weight printed in each cell ("~" before it when masked), the chosen cell boxed, gold facts
    marked in the row label; a colour bar for the weights and a legend for the marks. Text is
    drawn literally (a '$' in a story is not mathtext, whatever the rc settings) and sentences
    and the question cut to PNG_TEXT characters. The width grows with the longest row label and
    the hops taken, the height with the rows."""
    import matplotlib
    import numpy
    from matplotlib.figure import Figure  # no pyplot: no global figure, no backend switch
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    table = shown(table, lambda text: safe.cut(safe.printable(text), PNG_TEXT))
    literal = {"parse_math": False}  # story text is data, never markup
    weights = numpy.array(table.attention).T  # (memories, hops), the table's float64 values
    rows = [f"{i} {t}" + (f"  [gold {table.gold(r)}]" if table.gold(r) else "") for r, (i, t) in enumerate(table.memories)]
    gold = table.answer if table.answer is not None else "?"
    title = f"{table.question}  predicted: {table.prediction} ({table.probability:.2f}), gold: {gold}"
    if table.declined:  # as the text table says it: the answer shown is a guess the model declined to give
        title = f"cannot answer: {safe.cut(safe.printable(table.declined), 2 * PNG_TEXT)}; its best guess:\n{title}"
    label_width = 0.08 * max(len(r) for r in rows)  # inches, roughly, at the tick (and title) font size
    # wide enough for the cells, and for the title, which starts over the first cell
    width = max(2.6 + 1.1 * table.hops_used, 1.0 + 0.08 * max(len(line) for line in title.split("\n"))) + label_width
    with matplotlib.rc_context({"text.usetex": False}):
        fig = Figure(figsize=(width, 2.4 + 0.38 * len(rows) + 0.2 * title.count("\n")), layout="constrained")
        ax = fig.subplots()
        image = ax.imshow(weights, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        fig.colorbar(image, ax=ax, label="attention weight",
                     fraction=0.08, pad=0.03,  # pragma: no mutate (layout: the bar's width and gap)
                     )
        for r in range(len(rows)):
            for k in range(table.hops_used):
                w = weights[r, k]
                masked = r in table.masked[k]
                ax.text(k, r, ("~" if masked else "") + f"{w:.2f}", ha="center", va="center", fontsize=9,
                        color="white" if w > 0.6 else "black")
                if table.chosen[k] == r:
                    ax.add_patch(Rectangle((k - 0.5, r - 0.5), 1, 1, fill=False, edgecolor=CHOSEN_COLOUR, linewidth=2))
        ax.set_xticks(range(table.hops_used), [f"{table.step} {k + 1}\n→ {a}" + ("\n(all masked)" if k in table.all_masked else "")
                                               for k, (a, _) in enumerate(table.hop_answers)], **literal)
        ax.set_yticks(range(len(rows)), rows, **literal)
        ax.xaxis.tick_top()
        ax.set_title(title, fontsize=10, loc="left", **literal,
                     pad=8,  # pragma: no mutate (layout: points between the title and the hop labels)
                     )
        ax.legend(handles=_legend(Line2D, table.step), loc="upper left", bbox_to_anchor=(0, -0.02), fontsize=8,
                  frameon=False, handlelength=1)
    return fig


def heatmap(table: Table, path: str | os.PathLike):
    """`heatmap_figure(table)` written to `path` as a png (120 dpi), atomically: a full disk
    leaves no 0-byte png. Returns the Figure. (Every text is made in heatmap_figure, under its
    own rc settings; ticks the draw adds copy the first tick's.)"""
    fig = heatmap_figure(table)
    buffer = io.BytesIO()  # drawn in memory, then written atomically
    fig.savefig(buffer, format="png", dpi=120)
    atomic_write(path, buffer.getvalue())
    return fig


def _legend(Line2D, step: str) -> list:
    """The heatmap's legend: what its marks mean."""
    return [Line2D([], [], marker="s", markersize=11, markerfacecolor="none", markeredgecolor=CHOSEN_COLOUR, linestyle="none",
                   label=f"chosen memory: the {step}'s argmax"),
            Line2D([], [], linestyle="none", label="~0.00: masked, chosen by an earlier hop"),
            Line2D([], [], linestyle="none", label="[gold k]: the k-th supporting fact, in reasoning order"),
            Line2D([], [], linestyle="none", label=f"→ answer: the answer had it stopped after that {step}")]

