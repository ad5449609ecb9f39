"""The readers' config sections, their ranges and their checks (no torch: the command line reads
them to make its flags). The package reads these sections as it reads its own (unknown keys,
types, memnet.config.RANGES by field name); `check` adds what only these readers have."""
from __future__ import annotations

import json
from dataclasses import dataclass

from memnet.config import Config, ConfigError, _finite, check_ranges, from_dict


@dataclass
class PairsConfig:
    """The pair reader (experiments/readers/pairs.py): attention over ordered pairs of memories."""

    type: str = "pairs"
    dim: int = 32  # embedding size d
    hidden: int = 128  # hidden units in each of the two layers of the pair's score and of its answer
    max_words: int = 20  # word positions the learned masks cover (bAbI's longest sentence has 11)
    temporal: bool = True  # temporal encoding T(i) of each memory's age (from 0)
    # an answer phrase scores the sum of its words' scores at their places ('n,e': n first + e
    # second), else one score per phrase
    places: bool = True  # an answer phrase scores the sum of its words at their places
    # with places: place 1 of a phrase scored from the pair's first fact alone, every later place
    # from its second ([u; m; u ⊙ m] each), as a path's steps come from its facts (qa19); else
    # every place from the whole pair
    place_facts: bool = False  # place 1 of a phrase from the pair's first fact, later places from its second
    dropout: float = 0.1  # dropout on the answer's first hidden layer, in training
    init_std: float = 1.0  # standard deviation of the embeddings' starting normal


@dataclass
class WordsConfig:
    """The word reader (experiments/readers/words.py): every question word reads the story's words."""

    type: str = "words"
    dim: int = 32  # embedding size d (each BiGRU direction's size; a word's vector is 2d)
    hidden: int = 64  # hidden units of the answer's layer over the pooled question words
    temporal: bool = True  # temporal encoding T(i) of each memory's age (from 0), added to its words
    init_std: float = 1.0  # standard deviation of the embeddings' starting normal
    dropout: float = 0.0  # dropout in training on the embedded words, the compared words and the pooled vector
    summed: bool = False  # each question word also reads the story's words summed, each through a gate (counts, lists)
    # with summed: the summed read, averaged over the question's words, also goes straight to the
    # answer's layer beside the pooled comparison (the comparing GRU squashes what it reads: what
    # it passes on of a count is bounded)
    summed_out: bool = False  # the summed read also goes to the answer's layer, past the comparing GRU
    # an answer of several items ('apple,milk', qa8's lists) scores its own output plus each of its
    # items' outputs, so that what says an item is carried counts toward every list that holds it
    # (a pair is rare in training: 58 of qa8's 900 questions)
    list_answers: bool = False  # a list answer also scores its items' outputs
    # at inference, a list answer takes its items in the order the story first names them among the
    # facts the summed read's gates open (bAbI's lists name the objects in the order of the first
    # supporting fact naming each: 58 of 58 pairs of qa8's training split): the probability of the
    # orders of one set of items goes to the order the facts give (needs summed)
    list_order: bool = False  # at inference, a list's items in the order the open facts name them


@dataclass
class ItemsConfig:
    """The item reader (experiments/readers/items.py): one read of the story for each item an answer can hold."""

    type: str = "items"
    dim: int = 32  # embedding size d
    hidden: int = 64  # hidden units of each item's score
    max_words: int = 20  # word positions the learned masks cover (bAbI's longest sentence has 11)
    temporal: bool = True  # temporal encoding T(i) of each memory's age (from 0)
    init_std: float = 1.0  # standard deviation of the embeddings' and the items' starting normal
    dropout: float = 0.0  # dropout on each item's hidden layer, in training


@dataclass
class MixtureConfig:
    """Two trained readers and a gate over the question's words (experiments/readers/mixture.py),
    written by experiments/readers/mix.py, never trained by memnet train. The checkpoint's
    vocabulary is reader A's; the state_dict holds both readers and the gate."""

    type: str = "mixture"
    a: str = ""  # reader A's whole config, as JSON
    b: str = ""  # reader B's whole config, as JSON
    b_vocab: str = ""  # reader B's vocabulary, as JSON (memnet.data.Vocab.to_dict)
    confidence: bool = False  # the gate also reads each reader's top probability


# the readers' fields with a range (memnet.config.RANGES covers the names they share with the package's)
RANGES = {
    "model.hidden": (">= 1", lambda v: v >= 1),
    "model.dropout": ("between 0 (inclusive) and 1", _finite(lambda v: 0 <= v < 1)),
}


def check(cfg: Config) -> None:
    """The ranges above, and the fields that constrain each other."""
    check_ranges(cfg, RANGES)
    model = cfg.model
    if isinstance(model, MixtureConfig) and not (model.a and model.b and model.b_vocab):
        raise ConfigError("model.type: a mixture is made of two trained runs by python -m experiments.readers.mix, "
                          "not trained; its model.a, model.b and model.b_vocab are that command's")
    if isinstance(model, PairsConfig) and model.place_facts and not model.places:
        raise ConfigError("model.place_facts: scores each place of an answer phrase from one fact of the pair; "
                          "it needs model.places true, found false")
    if isinstance(model, WordsConfig) and model.list_order and not model.summed:
        raise ConfigError("model.list_order: orders a list's items by the facts the summed read's gates open; "
                          "it needs model.summed true, found false")
    if isinstance(model, WordsConfig) and model.summed_out and not model.summed:
        raise ConfigError("model.summed_out: takes the summed read to the answer's layer; "
                          "it needs model.summed true, found false")
    if isinstance(model, WordsConfig) and cfg.train.attention_supervision and not model.summed:
        raise ConfigError("train.attention_supervision: the word reader (model.type words) has no hops; it "
                          "supervises the gates of its summed read, so it needs model.summed true, found false")


def describe(cfg: Config) -> tuple[int, str]:
    """(the most steps a question takes, the setting line) for `memnet report`'s header."""
    mc = cfg.model
    if isinstance(mc, PairsConfig):  # a pair's two facts for hops
        answer = "by places, each from one fact" if mc.place_facts else "by places" if mc.places else "per phrase"
        return 2, f"{mc.type}, d={mc.dim}, {mc.hidden} hidden, answer {answer}"
    if isinstance(mc, WordsConfig):  # one read of the story's words
        return 1, f"{mc.type}, d={mc.dim}, {mc.hidden} hidden"
    if isinstance(mc, ItemsConfig):  # one read per item
        return 1, f"{mc.type}, d={mc.dim}, {mc.hidden} hidden, an answer as a set of items"
    from memnet.report import describe as readers_line  # a mixture: reader A's steps (report is loaded by now)
    a, b = (from_dict(json.loads(text)) for text in (mc.a, mc.b))
    steps, line = readers_line(a)
    return steps, f"mixture of {a.model.type} and {b.model.type}; reader A: {line}"
