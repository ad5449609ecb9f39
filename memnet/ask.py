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
question asks about a name or thing the story never mentions ("What color is Greg?" with no
Greg in the story; which of a form's X must be mentioned is learned in training, see
memnet.forms), when the question has a word the model never saw, when the question or the story
holds no word the model knows, or when its best answer's probability is under `min_probability`
(then the table still shows what it would have said). A word the model never saw whose other
spelling it knows (SPELLINGS: colour/color, grey/gray, ...) is read as that one, with a note.

The Python API (memnet.api: `model.answer(story, question)`) reads a typed story with
`typed_sample` and declines with `answer`, by the same rules.
"""
from __future__ import annotations

import re
import sys
from typing import Callable, Sequence, TextIO

import torch

from memnet.babi import Line, Sample, spaced_question, tokenize
from memnet.config import Config
from memnet.data import Vocab
from memnet.errors import MemnetError
from memnet.forms import known_form, slots
from memnet.inspect import Table, inspect_samples, render
from memnet.safe import cut

MIN_PROBABILITY = 0.5
HELP = ("Type story sentences one per line, then a question ending in '?'. "
        "'reset' starts a new story, 'quit' (or Ctrl-D) stops.")
_LINE_ID = re.compile(r"^\d+\s+")
# no bAbI story sentence starts with these: a line that does is a question without its '?'
_QUESTION_WORDS = {"what", "where", "who", "whom", "whose", "which", "when", "why", "how", "is", "are", "was",
                   "were", "does", "do", "did", "can", "will"}


# British and American spellings of words that bAbI stories and questions use. A word the model
# never saw is read as its other spelling when the model knows that one, and a note says so.
SPELLINGS = {"colour": "color", "grey": "gray", "favourite": "favorite", "travelled": "traveled"}
_OTHER_SPELLING = {**SPELLINGS, **{us: uk for uk, us in SPELLINGS.items()}}
_TYPED_WORD = re.compile(r"[a-z0-9]+", re.IGNORECASE)  # babi.tokenize's words, as typed
_SHOWN = 40  # characters of a word or question shown in a message: a typed word can be megabytes long


class CannotAnswer(MemnetError):
    """The model cannot be asked this question; the message says why."""


def respell(text: str, vocab: Vocab, notes: dict[str, str]) -> str:
    """`text` with each word the model never saw whose other spelling (SPELLINGS) it knows
    written that way: 'What colour is Greg?' -> 'What color is Greg?'; adds {'colour': 'color'}
    to `notes`."""
    def other(m: re.Match) -> str:
        word = m.group(0)
        respelled = _OTHER_SPELLING.get(word.lower())
        if respelled is None or word.lower() in vocab.stoi or respelled not in vocab.stoi:
            return word
        notes[word.lower()] = respelled
        return respelled.capitalize() if word[0].isupper() else respelled

    return _TYPED_WORD.sub(other, text)


def respelled(sample: Sample, vocab: Vocab) -> tuple[Sample, list[str]]:
    """The sample with its words respelled (respell), and a note for each: "reading 'colour' as 'color'"."""
    notes: dict[str, str] = {}
    facts = tuple(Line(f.id, respell(f.text, vocab, notes), f.answer, f.support) for f in sample.facts)
    q = sample.question
    question = Line(q.id, respell(q.text, vocab, notes), q.answer, q.support)
    return Sample(facts, question), [f"reading {_quoted(a)} as {_quoted(b)}" for a, b in notes.items()]


def _quoted(text: str) -> str:
    return repr(cut(text, _SHOWN))


def _listed(words: list[str], quote: bool = True, limit: int = 5) -> str:
    """'Greg', 'Greg or Lily', 'Greg, Lily or Bill' (each cut short; at most `limit`, then how many more)."""
    shown = [_quoted(w) if quote else cut(w, _SHOWN) for w in words[:limit]]
    if len(words) > limit:
        return f"{', '.join(shown)} and {len(words) - limit} more"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _as_typed(text: str) -> list[str]:
    """The words of `text` as tokenize reads them, in the case they were typed where the two line up."""
    words, typed = tokenize(text), _TYPED_WORD.findall(text)
    return typed if [w.lower() for w in typed] == words else words


def why_not(sample: Sample, vocab: Vocab) -> str | None:
    """Why the model cannot answer `sample` before it runs, or None when it can try."""
    question = sample.question.text
    if not sample.facts:
        return "the story has no sentences before the question"
    words = tokenize(question)
    if not any(w in vocab.stoi for w in words):
        return f"the question {_quoted(question)} has no word the model knows"
    story = {w for f in sample.facts for w in tokenize(f.text)}
    if not any(w in vocab.stoi for w in story):
        return "the story has no word the model knows"
    unknown = list(dict.fromkeys(w for w in words if w not in vocab.stoi))  # each word once, in order
    never = f" ({_listed(unknown)} never occurred in training)" if unknown else ""
    if vocab.forms is None:  # a checkpoint from before question forms: only the words can be checked
        return f"the question has words the model never saw{never}" if unknown else None
    form = known_form(question, vocab.forms)
    if form is None:
        forms = "; ".join(f"{f}?" for f in vocab.forms[:5])
        more = f"; ... ({len(vocab.forms)} in all, listed when memnet ask starts)" if len(vocab.forms) > 5 else ""
        return f"the model was never asked a question like {_quoted(question)}{never}; it knows: {forms}{more}"
    # the X of the form that name what the question is about; a checkpoint from before
    # `mentioned` holds every X to it
    about = slots(form) if vocab.mentioned is None else vocab.mentioned.get(form, slots(form))
    typed = _as_typed(question)
    absent = list(dict.fromkeys(typed[i] for i in about if words[i] not in story))
    if absent:
        return f"the story never mentions {_listed(absent, quote=False)}" + (
            f" (and the model never saw {_listed(unknown)})" if unknown else "")
    if unknown:
        return f"the model never saw {_listed(unknown)} in training: it cannot know what the question asks"
    return None


def classify(text: str) -> tuple[str, str]:
    """What one typed line (its line number removed) is: ("fact", ""), ("question", ""), or
    ("hint", why it is neither: a question with words after its '?', or one without its '?')."""
    if spaced_question(text) or "\t" in text and text.split("\t")[0].rstrip().endswith("?"):
        return "hint", (f"{_quoted(text)} has words after its '?'; type the question alone (ask needs no answer "
                        f"or supporting ids; in a story file they follow the question after tabs)")
    if text.endswith("?"):
        return "question", ""
    words = tokenize(text)
    if words and words[0] in _QUESTION_WORDS:
        return "hint", f"{_quoted(text)} reads like a question; end it with '?' to ask it"
    return "fact", ""


def typed_sample(story: str | Sequence[str], question: str) -> Sample:
    """The Sample of a typed story (one sentence a line: a multi-line string or a list) and
    question, read as `memnet ask` reads typed lines: blank lines and leading line numbers
    are dropped. MemnetError where a story line is not a sentence (a question, or one that
    reads like a question) or the question is not one."""
    lines = story.splitlines() if isinstance(story, str) else list(story)
    facts: list[Line] = []
    for n, raw in enumerate(lines, 1):
        text = _LINE_ID.sub("", str(raw).strip())
        if not text:
            continue
        kind, hint = classify(text)
        if kind != "fact":
            raise MemnetError(f"story line {n}: " + (hint or f"{_quoted(text)} is a question; the story holds "
                                                              "sentences only, the question goes apart"))
        facts.append(Line(len(facts) + 1, text))
    text = _LINE_ID.sub("", question.strip())
    kind, hint = classify(text)
    if kind != "question":
        raise MemnetError("question: " + (hint or f"expected a question ending in '?', found {_quoted(text)}"))
    return Sample(tuple(facts), Line(len(facts) + 1, text, "", ()))


def answer(model: torch.nn.Module, vocab: Vocab, cfg: Config, sample: Sample, *, label: str = "",
           min_probability: float = MIN_PROBABILITY, heads: bool = False,
           say: Callable[[str], None] | None = None) -> Table:
    """The attention table of one question (memnet.inspect.inspect_samples); CannotAnswer when
    the model cannot be asked it, and the table's `declined` set when its answer is less likely
    than `min_probability`. `say` gets a note for each word read in its other spelling."""
    sample, notes = respelled(sample, vocab)
    for note in notes if say is not None else ():
        say(note)
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
        print(f"warning: the model never saw {', '.join(_quoted(w) for w in unknown[:10])}"
              f"{f' and {len(unknown) - 10} more' if len(unknown) > 10 else ''}; ignored", file=err)


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
        kind, hint = classify(text)
        if kind == "hint":
            print(f"hint: {hint} (not added to the story)", file=out)
            continue
        if kind == "fact":
            notes: dict[str, str] = {}
            text = respell(text, vocab, notes)
            for a, b in notes.items():
                print(f"note: reading {_quoted(a)} as {_quoted(b)}", file=out)
            facts.append(Line(next_id, text))
            next_id += 1
            _warn_unknown(tokenize(text), vocab, err)
            continue
        question = Line(next_id, text, "", ())
        next_id += 1
        try:
            table = answer(model, vocab, cfg, Sample(tuple(facts), question), min_probability=min_probability,
                           say=lambda note: print(f"note: {note}", file=out))
        except CannotAnswer as e:
            print(e, file=out)  # the reason names the words the model never saw
            continue
        out.write(render([table], fmt, color=color))
        out.flush()
