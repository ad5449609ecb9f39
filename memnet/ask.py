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
and left out, and a question it cannot read gets a message, never a crash.
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
from memnet.inspect import inspect_samples, render

HELP = ("Type story sentences one per line, then a question ending in '?'. "
        "'reset' starts a new story, 'quit' (or Ctrl-D) stops.")
_LINE_ID = re.compile(r"^\d+\s+")


def session(model: torch.nn.Module, vocab: Vocab, cfg: Config, stream: TextIO, out: TextIO, *,
            err: TextIO | None = None, fmt: str = "text", color: bool = False, prompt: bool = False) -> None:
    err = err or sys.stderr
    facts: list[Line] = []
    next_id = 1
    if prompt:
        print(HELP, file=out)
    while True:
        if prompt:
            out.write("> ")
            out.flush()
        try:
            raw = stream.readline()
        except UnicodeDecodeError as e:
            raise MemnetError(f"standard input: expected UTF-8 text, found byte 0x{e.object[e.start]:02x}") from None
        if not raw:
            break
        text = _LINE_ID.sub("", raw.strip())
        if not text:
            continue
        if text.lower() == "reset":
            facts, next_id = [], 1
            print("(new story)", file=out)
            continue
        if text.lower() in ("quit", "exit"):
            break
        unknown = [w for w in tokenize(text) if w not in vocab.stoi]
        if unknown:
            print(f"warning: the model never saw {', '.join(map(repr, unknown))}; ignored", file=err)
        if not text.endswith("?"):
            facts.append(Line(next_id, text))
            next_id += 1
            continue
        question = Line(next_id, text, "", ())
        next_id += 1
        try:
            tables = inspect_samples(model, vocab, cfg, [Sample(tuple(facts), question)])
        except MemnetError as e:
            print(f"cannot answer: {e}", file=out)
            continue
        out.write(render(tables, fmt, color=color))
        out.flush()
