"""Readers built around a few bAbI tasks, as a memnet plug-in (docs/plugins.md): the pair reader
(model.type pairs, qa19's paths), the word reader (words: which fact names which thing, counts
and lists), the item reader (items: an answer as a set of items, each read for on its own) and a
mixture of two trained readers (mixture, written by mix.py).

Importing this module registers the four model types; memnet imports it where the environment
says so, from the repository root:

    MEMNET_PLUGINS=experiments.readers PYTHONPATH=. memnet train --config none --model.type=words ...

The models themselves (and torch) load only when one is built.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from memnet.config import Config
from memnet.registry import register

if TYPE_CHECKING:  # memnet.data loads torch, which the command line's flags do without
    from memnet.data import Vocab

from experiments.readers.config import ItemsConfig, MixtureConfig, PairsConfig, WordsConfig, check, describe


def build_pairs(cfg: Config, vocab: Vocab):
    from experiments.readers.pairs import PairReader
    m = cfg.model
    return PairReader(vocab_size=len(vocab), answers=vocab.answers, memory_size=cfg.data.memory_size, dim=m.dim,
                      hidden=m.hidden, max_words=m.max_words, temporal=m.temporal, places=m.places,
                      place_facts=m.place_facts, dropout=m.dropout,
                      attention_supervision=cfg.train.attention_supervision)


def build_words(cfg: Config, vocab: Vocab):
    from experiments.readers.words import WordReader, list_parts
    m = cfg.model
    return WordReader(vocab_size=len(vocab), n_answers=len(vocab.answers), memory_size=cfg.data.memory_size,
                      dim=m.dim, hidden=m.hidden, temporal=m.temporal, dropout=m.dropout,
                      summed=m.summed, summed_out=m.summed_out,
                      list_parts=list_parts(vocab.answers) if m.list_answers else None,
                      list_words=vocab.answer_words() if m.list_order else None,
                      attention_supervision=cfg.train.attention_supervision)


def build_items(cfg: Config, vocab: Vocab):
    from experiments.readers.items import ItemReader, answer_items
    m = cfg.model
    items = answer_items(vocab.answers)[0]  # item_words: the id of each, 0 where the vocabulary has no such word
    return ItemReader(vocab_size=len(vocab), answers=vocab.answers, memory_size=cfg.data.memory_size, dim=m.dim,
                      hidden=m.hidden, max_words=m.max_words, temporal=m.temporal, dropout=m.dropout,
                      item_words=[vocab.stoi.get(w, 0) for w in items])


def build_mixture(cfg: Config, vocab: Vocab):
    from experiments.readers.mixture import from_config
    return from_config(cfg, vocab)


register("pairs", PairsConfig, build_pairs, check=check, describe=describe, step="fact", module=__name__)
register("words", WordsConfig, build_words, check=check, describe=describe, step="read", module=__name__)
register("items", ItemsConfig, build_items, check=check, describe=describe, step="read", module=__name__)
# the mixture's attention and hops are reader A's, a memory network's as a rule
register("mixture", MixtureConfig, build_mixture, check=check, describe=describe, step="hop", module=__name__)
