"""Interactive mode: type a story one sentence a line, then a question; the model answers.

    > Brian is a frog.
    > Brian is yellow.
    > Greg is a frog.
    > What color is Greg?
    (attention table, answer)
    > reset

A line ending in '?' is a question about the sentences typed so far (the story goes on after
it, as in bAbI); `reset` starts a new story; `quit` or end of input stops. A leading line
number ("1 Brian is a frog.") is allowed and ignored. Words the model never saw are reported
and left out.

The model answers only what it can: `answer` says "cannot answer", with the reason, when the
question's form never occurred in training (a colour model asked "Where is Greg?"), when the
question or the story holds no word the model knows, or when its best answer's probability is
under `min_probability` (then the table still shows what it would have said).
"""
from __future__ import annotations

import re
import sys
from typing import TextIO

import torch

from memnet.babi import Line, Sample, tokenize
from memnet.config import Config
from memnet.data import Vocab
from memnet.errors import MemnetError
from memnet.forms import known_form
from memnet.inspect import Table, inspect_samples, render

MIN_PROBABILITY = 0.5
HELP = ("Type story sentences one per line, then a question ending in '?'. "
        "'reset' starts a new story, 'quit' (or Ctrl-D) stops.")
_LINE_ID = re.compile(r"^\d+\s+")
# no bAbI story sentence starts with these: a line that does is a question without its '?'
_QUESTION_WORDS = {"what", "where", "who", "whom", "whose", "which", "when", "why", "how", "is", "are", "was",
                   "were", "does", "do", "did", "can", "will"}


class CannotAnswer(MemnetError):
    """The model cannot be asked this question; the message says why."""


def why_not(sample: Sample, vocab: Vocab) -> str | None:
    """Why the model cannot answer `sample` before it runs, or None when it can try."""
    question = sample.question.text
    if not sample.facts:
        return "the story has no sentences before the question"
    words = tokenize(question)
    if not any(w in vocab.stoi for w in words):
        return f"the question {question!r} has no word the model knows"
    if not any(w in vocab.stoi for f in sample.facts for w in tokenize(f.text)):
        return "the story has no word the model knows"
    unknown = list(dict.fromkeys(w for w in words if w not in vocab.stoi))  # each word once, in order
    never = f" ({', '.join(map(repr, unknown))} never occurred in training)" if unknown else ""
    if vocab.forms is None:  # a checkpoint from before question forms: only the words can be checked
        return f"the question has words the model never saw{never}" if unknown else None
    if known_form(question, vocab.forms) is None:
        forms = "; ".join(f"{f}?" for f in vocab.forms[:5])
        more = f"; ... ({len(vocab.forms)} in all, listed when memnet ask starts)" if len(vocab.forms) > 5 else ""
        return f"the model was never asked a question like {question!r}{never}; it knows: {forms}{more}"
    return None


def answer(model: torch.nn.Module, vocab: Vocab, cfg: Config, sample: Sample, *, label: str = "",
           min_probability: float = MIN_PROBABILITY, heads: bool = False) -> Table:
    """The attention table of one question (memnet.inspect.inspect_samples); CannotAnswer when
    the model cannot be asked it, and the table's `declined` set when its answer is less likely
    than `min_probability`."""
    reason = why_not(sample, vocab)
    if reason:
        raise CannotAnswer(f"cannot answer: {reason}")
    table = inspect_samples(model, vocab, cfg, [sample], [label] if label else None, heads=heads)[0]
    if table.probability < min_probability:
        table.declined = (f"the model is not sure (its best answer has p={table.probability:.2f}, "
                          f"under --min-probability {min_probability:.2f})")
    return table


def describe(vocab: Vocab, min_probability: float) -> str:
    """What the model can be asked, printed when a session starts."""
    if vocab.forms is None:
        forms = "(this checkpoint predates question forms: only the question's words are checked)"
    else:
        forms = "\n".join(f"  {f}?" for f in vocab.forms)
    return (f"The model knows questions of these forms (X: a name or thing):\n{forms}\n"
            f"It declines answers it gives with p under {min_probability:.2f} (--min-probability).")


def _reader(stream: TextIO, out: TextIO, prompt: bool):
    """The typed lines; on a terminal through input(), which readline gives line editing and
    history (the arrow keys), where the platform has it."""
    if prompt:
        try:
            import readline  # noqa: F401  (importing it is what turns editing on for input())
        except ImportError:
            pass
        while True:
            try:
                yield _utf8(input("> "))
            except EOFError:
                print(file=out)
                return
            except UnicodeDecodeError as e:
                raise _not_utf8(e.object[e.start]) from None
    while True:
        try:
            line = stream.readline()
        except UnicodeDecodeError as e:
            raise _not_utf8(e.object[e.start]) from None
        if not line:
            return
        yield _utf8(line)


def _utf8(line: str) -> str:
    """The line, or MemnetError where it holds a byte that is not UTF-8: with the surrogateescape
    error handler (Python's for standard input under a C or POSIX locale) such a byte arrives
    as a lone surrogate, U+DC80-U+DCFF, instead of raising UnicodeDecodeError."""
    bad = next((c for c in line if "\udc80" <= c <= "\udcff"), None)
    if bad is not None:
        raise _not_utf8(ord(bad) - 0xDC00)
    return line


def _not_utf8(byte: int) -> MemnetError:
    return MemnetError(f"standard input: expected UTF-8 text, found byte 0x{byte:02x}")


def _warn_unknown(words: list[str], vocab: Vocab, err: TextIO) -> None:
    unknown = list(dict.fromkeys(w for w in words if w not in vocab.stoi))  # each word once, in order
    if unknown:
        print(f"warning: the model never saw {', '.join(map(repr, unknown))}; ignored", file=err)


def session(model: torch.nn.Module, vocab: Vocab, cfg: Config, stream: TextIO, out: TextIO, *,
            err: TextIO | None = None, fmt: str = "text", color: bool = False, prompt: bool = False,
            min_probability: float = MIN_PROBABILITY) -> None:
    err = err or sys.stderr
    facts: list[Line] = []
    next_id = 1
    print(describe(vocab, min_probability), file=out)
    if prompt:
        print(HELP, file=out)
    for raw in _reader(stream, out, prompt):
        text = _LINE_ID.sub("", raw.strip())
        if not text:
            continue
        if text.lower() == "reset":
            facts, next_id = [], 1
            print("(new story)", file=out)
            continue
        if text.lower() in ("quit", "exit"):
            break
        words = tokenize(text)
        if not text.endswith("?") and words and words[0] in _QUESTION_WORDS:
            print(f"hint: {text!r} reads like a question; end it with '?' to ask it (not added to the story)", file=out)
            continue
        if not text.endswith("?"):
            facts.append(Line(next_id, text))
            next_id += 1
            _warn_unknown(words, vocab, err)
            continue
        question = Line(next_id, text, "", ())
        next_id += 1
        try:
            table = answer(model, vocab, cfg, Sample(tuple(facts), question), min_probability=min_probability)
        except CannotAnswer as e:
            print(e, file=out)  # the reason names the words the model never saw
            continue
        _warn_unknown(words, vocab, err)
        out.write(render([table], fmt, color=color))
        out.flush()
