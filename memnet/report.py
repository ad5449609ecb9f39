"""A self-contained HTML report of a trained model on one split: the run's metrics, then every
question's attention table as coloured cells, with a checkbox that shows only wrong answers.
Questions whose story allows several answers (the solver of `memnet check` finds them; in qa16
the files pick one by a convention, the kind-mate introduced last) carry a flag beside the gold
answer; a prediction that the story allows counts as ambiguous there, not wrong.

One file, no network and no external assets (inline CSS and a few lines of inline JS), so it
can be mailed, archived or opened offline.
"""
from __future__ import annotations

import os
from collections import Counter
from html import escape
from typing import Any, Sequence

import torch

from memnet import safe, solver
from memnet.babi import Sample, Task
from memnet import registry
from memnet.config import Config, MemN2NConfig, TransformerConfig
from memnet.data import Vocab, encode_samples
from memnet.evaluation import evaluate
from memnet.files import atomic_write
from memnet.inspect import Table, inspect_samples, shown

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 1.4em; }
.sub { color: #666; margin-top: 0; }
.side { display: flex; gap: 3em; align-items: flex-start; }
th { text-align: left; }
table { border-collapse: collapse; margin: .4em 0; }
td, th { border: 1px solid #ddd; padding: 2px 8px; }
th { background: #f4f4f4; font-weight: 600; }
table.metrics td.num, table.attention td.w { text-align: right; font-variant-numeric: tabular-nums; }
table.attention td.w { min-width: 3.5em; }
td.chosen { outline: 2px solid #d62728; outline-offset: -2px; font-weight: 700; }
td.masked { text-decoration: line-through; color: #888; }
td.gold { color: #0a7d8c; font-weight: 600; text-align: center; }
td.def { color: #555; max-width: 34em; }
#hops-used td { white-space: nowrap; }
.bar { display: inline-block; height: .8em; background: #1f77b4; vertical-align: middle; }
.question { margin: 1em 0 1.4em; padding-left: .8em; border-left: 4px solid #2ca02c; }
.question.wrong { border-left-color: #d62728; } .question.ambiguous { border-left-color: #e0a000; }
.flag { color: #a06800; font-weight: 600; }
.question h3 { font-size: 1em; margin: 0 0 .2em; }
.verdict.wrong { color: #d62728; font-weight: 700; } .verdict.right { color: #2ca02c; font-weight: 700; }
.verdict.ambiguous { color: #a06800; font-weight: 700; }
.hops { color: #555; font-size: .92em; }
body.wrong-only .question.right, body.wrong-only .question.ambiguous { display: none; }
#filter { position: sticky; top: 0; background: #fff; padding: .4em 0; border-bottom: 1px solid #eee; }
"""

# The only script: the checkbox toggles a class on <body>; CSS hides the right answers.
_JS = """
document.getElementById('wrong-only').addEventListener('change', function (e) {
  document.body.classList.toggle('wrong-only', e.target.checked);
});
"""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


# what each metric means, beside its value: a reader of the page has no other place to look it up
DEFINITIONS = {
    "questions": "questions in the split",
    "accuracy": "share of the questions whose answer (where the model stopped) is the gold answer",
    "chain accuracy": "share of the questions whose hops 1, 2, ... each chose the supporting fact of their place in the "
                      "reasoning order, for as many hops as both the model took and the question has facts",
    "support recall": "share of all supporting facts that some hop taken chose, in any order",
    "mean hops used": "hops taken per question, on average: the stopping rule's choice, else every hop",
}


def _hop_definition(k: int) -> str:
    return (f"of the questions with a {_ordinal(k)} supporting fact, the share whose hop {k} (when taken) chose "
            f"that fact, the {_ordinal(k)} in the reasoning order")


def _metrics_html(m: dict[str, Any], hops_used: Counter, max_hops: int) -> str:
    rows = [("questions", str(m["n"])), ("accuracy", _pct(m["accuracy"])), ("chain accuracy", _pct(m["chain_accuracy"])),
            ("support recall", _pct(m["support_recall"])), ("mean hops used", f"{m['mean_hops']:.2f}")]
    rows = [(name, value, DEFINITIONS[name]) for name, value in rows]
    rows += [(f"hop {k + 1} accuracy", _pct(a), _hop_definition(k + 1)) for k, a in enumerate(m["hop_accuracy"])]
    out = ['<div class="side"><div><h2>Metrics</h2><table class="metrics" id="metrics">',
           '<tr><th>metric</th><th>value</th><th>what it measures</th></tr>']
    out += [f'<tr><th>{escape(name)}</th><td class="num">{value}</td><td class="def">{escape(meaning, quote=False)}</td></tr>'
            for name, value, meaning in rows]
    out.append("</table>")
    out.append('<p class="sub">A hop <i>chooses</i> the memory it attends to most (its argmax); "n/a": no question '
               "has that many supporting facts.</p></div>")
    total = sum(hops_used.values()) or 1
    out.append('<div><h2>Hops used</h2><p class="sub">how many questions stopped after each number of hops</p>'
               '<table class="metrics" id="hops-used"><tr><th>hops</th><th>questions</th><th></th></tr>')
    for k in range(1, max_hops + 1):
        n = hops_used.get(k, 0)
        out.append(f'<tr><td class="num">{k}</td><td class="num">{n}</td>'
                   f'<td><span class="bar" style="width:{200 * n / total:.0f}px"></span> {_pct(n / total)}</td></tr>')
    out.append("</table></div></div>")
    return "\n".join(out)


def _verdict(t: Table, allowed: list[str]) -> str:
    """right, wrong, or ambiguous: the gold answer is one of several the story allows, and the
    prediction another."""
    if t.correct:
        return "right"
    return "ambiguous" if len(allowed) > 1 and t.prediction in allowed else "wrong"


def _table_html(t: Table, allowed: list[str]) -> str:
    verdict = _verdict(t, allowed)
    t, allowed = shown(t), [safe.shown(a) for a in allowed]  # long words cut, control characters visible
    gold = escape(t.answer) if t.answer is not None else "none given"
    if len(allowed) > 1:
        gold += (f' <span class="flag" title="the solver of memnet check: the story allows several answers">'
                 f'⚑ ambiguous: the story allows {escape(" or ".join(allowed))}</span>')
    head = "".join(f"<th>{t.step} {k + 1}</th>" if k not in t.all_masked
                   else f'<th title="{escape(t.all_masked_note())}">{t.step} {k + 1} (all masked)</th>'
                   for k in range(t.hops_used))
    rows = []
    for r, (line_id, sentence) in enumerate(t.memories):
        cells = []
        for k in range(t.hops_used):
            w = t.attention[k][r]
            kind = "chosen" if r == t.chosen[k] else "masked" if r in t.masked[k] else ""
            ink = "#fff" if w > 0.6 else "#222"
            cells.append(f'<td class="w {kind}" style="background:rgba(31,119,180,{w:.3f});color:{ink}">{w:.2f}</td>')
        g = t.gold(r)
        rows.append(f'<tr><td class="num">{line_id}</td><td>{escape(sentence)}</td><td class="gold">{g or ""}</td>{"".join(cells)}</tr>')
    if t.reads_nothing:  # as inspect's table: where a hop's weight went when it read no memory
        cells = "".join(f'<td class="w" style="background:rgba(31,119,180,{w:.3f});color:{"#fff" if w > 0.6 else "#222"}">'
                        f"{w:.2f}</td>" for w in t.nothing)
        rows.append(f'<tr class="nothing"><td></td><td><i>(nothing: the null memory)</i></td><td></td>{cells}</tr>')
    hop_answers = ", ".join(f"{t.step} {k + 1} → {escape(a)} ({p:.2f})" for k, (a, p) in enumerate(t.hop_answers))
    return (f'<section class="question {verdict}">\n<h3>{escape(t.label)}: {escape(t.question)}</h3>\n'
            f'<div>predicted <b>{escape(t.prediction)}</b> ({t.probability:.2f}), gold <b>{gold}</b> '
            f'<span class="verdict {verdict}">{_MARK[verdict]}</span> · {t.hops_used} of {t.max_hops} {t.step}s '
            f'({escape(t.stop_reason)})</div>\n'
            f'<table class="attention"><tr><th>id</th><th>sentence</th><th>gold</th>{head}</tr>\n' + "\n".join(rows)
            + f'</table>\n<div class="hops">had it stopped after: {hop_answers}</div>\n</section>')


_MARK = {"right": "✓", "wrong": "✗", "ambiguous": "≈ the story allows this answer too"}


_MASKING = {"off": "no masking", "hard": "hard masking", "soft": "soft masking",
            "second": "soft masking (hard at hop 2)"}
_ATTENTION = {"softmax": "softmax attention", "stick": "stick-breaking attention",
              "mixed": "attention mixing softmax and stick-breaking"}
_ENCODING = {"pe": "position encoding", "bow": "bag of words", "mask": "learned word masks"}


def describe(cfg: Config) -> tuple[int, str]:
    """(the most hops a question can take, the model in words) for the report's header:
    'MemN2N, d = 50, 3 hops, stopping rule on, hard masking, position encoding, ...'."""
    mc = cfg.model
    if isinstance(mc, MemN2NConfig):
        parts = ["MemN2N", f"d = {mc.dim}", f"{mc.hops} hop{'s' if mc.hops != 1 else ''}",
                 f"stopping rule {'on' if mc.stopping else 'off'}", _MASKING[mc.masking], _ENCODING[mc.encoding],
                 *(["temporal encoding"] if mc.temporal else []), f"{mc.tying} tying", _ATTENTION[mc.attention],
                 *(["a null memory"] if mc.null_memory else []),
                 *([f"a pointer in time (±{mc.relative_time})"] if mc.relative_time else []),
                 *([f"an answer module of {mc.answer_hidden} units"] if mc.answer_hidden else [])]
        return mc.hops, ", ".join(parts)
    if not isinstance(mc, TransformerConfig):  # a plug-in's (memnet.registry): its own line, else its type
        own = registry.get(mc.type).describe
        return own(cfg) if own is not None else (1, mc.type)
    # the transformer readers: layers (universal: steps of one shared layer) for hops, and their halting rule
    halting = "ACT halting per position" if mc.act else "stopping rule on" if mc.stopping else "stopping rule off"
    name = (f"Universal Transformer, d = {mc.dim}, {mc.layers} steps of one shared layer" if mc.type == "universal"
            else f"Transformer, d = {mc.dim}, {mc.layers} layer{'s' if mc.layers != 1 else ''}")
    return mc.layers, f"{name}, {mc.heads} heads, {halting}, {_ENCODING[mc.encoding]}"


def build(model: torch.nn.Module, vocab: Vocab, cfg: Config, questions: Sequence[Sample], *, title: str,
          limit: int | None = None, task: Task | None = None) -> str:
    """The whole page. Metrics cover every question (the trainer's evaluate); tables the
    first `limit` (all by default) and every wrong answer after them. With `task`, the
    solver flags the questions whose story allows several answers."""
    m = evaluate(model, encode_samples(questions, vocab, cfg.data.memory_size))
    tables = inspect_samples(model, vocab, cfg, questions, [f"#{i}" for i in range(len(questions))])
    allowed = [solver.answers(task, q.facts, q.question.text) if task is not None else [] for q in questions]
    verdicts = [_verdict(t, a) for t, a in zip(tables, allowed)]
    first = len(questions) if limit is None else limit
    shown = [i for i, v in enumerate(verdicts) if i < first or v == "wrong"]
    hidden = len(questions) - len(shown)
    note = (f"<p class=\"sub\">Showing the first {first} questions and every wrong answer after them; "
            f"{hidden} right or ambiguous answers are not shown (run without --limit to see them).</p>") if hidden else ""
    hops_used = Counter()  # over every question, from the metrics' (facts -> hops used) counts
    for counts in m["hops_by_facts"].values():
        hops_used.update({int(h): n for h, n in counts.items()})
    wrong, ambiguous = verdicts.count("wrong"), sum(len(a) > 1 for a in allowed)
    flagged = (f"; ambiguous (⚑): {ambiguous}, of which {verdicts.count('ambiguous')} answered with another answer "
               "the story allows") if ambiguous else ""
    max_hops, setting = describe(cfg)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>memnet report</title>
<style>{_CSS}</style></head>
<body>
<h1>memnet report</h1>
<p class="sub">{escape(title)}<br>The model: {escape(setting)}</p>
{_metrics_html(m, hops_used, max_hops)}
<h2>Attention, question by question</h2>
<div id="filter"><label><input type="checkbox" id="wrong-only"> show only wrong answers ({wrong} of {len(tables)}{flagged})</label></div>
{note}
<p class="sub">Darker cells carry more attention; the outlined cell is the hop's chosen memory (argmax); struck-through
cells were masked because an earlier hop chose them (a hop headed "all masked" found every memory masked and chose
none); the gold column is the supporting facts' reasoning order.</p>
{chr(10).join(_table_html(tables[i], allowed[i]) for i in shown)}
<script>{_JS}</script>
</body></html>
"""


def write(path: str | os.PathLike, html: str) -> None:
    atomic_write(path, html)
