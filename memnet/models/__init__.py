"""One interface for every model: `build_model(cfg, vocab)` and the `Result` of `forward`.

Every model takes a memnet.data.Batch of B questions (fields (B, ...), see memnet.data) and
returns a Result; the loss is there when the batch holds answers. Models are built with
keyword-only constructors from their own config section (memnet.config.MemN2NConfig,
TransformerConfig, or a plug-in's: memnet.registry) and hold one seed: restarts are several models
(see memnet.train).
"""
from __future__ import annotations

import torch
from torch import nn

from memnet import registry
from memnet.config import Config, MemN2NConfig, TransformerConfig
from memnet.data import Vocab
from memnet.models.ensemble import Ensemble
from memnet.models.memn2n import MemN2N
from memnet.models.result import HALT_REASONS, Result
from memnet.models.transformer import Transformer

__all__ = ["HALT_REASONS", "Ensemble", "MemN2N", "Result", "Transformer", "build_model", "ensemble_size", "init_weights", "n_parameters"]


def build_model(cfg: Config, vocab: Vocab, *, restart: bool = False) -> nn.Module:
    """The run's model: the one cfg.model.type names, for this vocabulary, with fresh weights
    (seed 0); with train.ensemble, an Ensemble of ensemble_size(cfg) of them. `restart`: one
    restart's model, never an ensemble (what the trainer trains)."""
    size = ensemble_size(cfg)
    if size > 1 and not restart:
        return Ensemble([build_model(cfg, vocab, restart=True) for _ in range(size)], cfg.train.ensemble_halting)
    m = cfg.model
    if isinstance(m, MemN2NConfig):
        return MemN2N(vocab_size=len(vocab), answer_words=vocab.answer_words(), memory_size=cfg.data.memory_size,
                      dim=m.dim, hops=m.hops, encoding=m.encoding, temporal=m.temporal, tying=m.tying,
                      masking=m.masking, answer_from=m.answer_from, null_memory=m.null_memory, stopping=m.stopping,
                      halt_cost=m.halt_cost, halt_threshold=m.halt_threshold, halt_confidence=m.halt_confidence,
                      halt_init=m.halt_init, mask_init=m.mask_init, mask_linear_start=m.mask_linear_start,
                      answer_hidden=m.answer_hidden, answer_reads=m.answer_reads, relative_time=m.relative_time, relative_query=m.relative_query, halt_training=m.halt_training, early_answers=m.early_answers,
                      early_answers_hop1=m.early_answers_hop1,
                      answer_rows=m.answer_rows, question_table=m.question_table, attention=m.attention, stick_init=m.stick_init,
                      second_switch=m.second_alternate,
                      attention_supervision=cfg.train.attention_supervision)
    if isinstance(m, TransformerConfig):
        return Transformer(vocab_size=len(vocab), n_answers=len(vocab.answers), memory_size=cfg.data.memory_size,
                           universal=m.type == "universal", dim=m.dim, layers=m.layers, heads=m.heads, ff_dim=m.ff_dim,
                           scale=m.scale, encoding=m.encoding, max_words=m.max_words, temporal=m.temporal,
                           stopping=m.stopping, halt_cost=m.halt_cost, halt_threshold=m.halt_threshold, act=m.act,
                           act_epsilon=m.act_epsilon, ponder_cost=m.ponder_cost,
                           attention_supervision=cfg.train.attention_supervision)
    return registry.get(m.type).build(cfg, vocab)  # a plug-in's (memnet.config admits no other)


def ensemble_size(cfg: Config) -> int:
    """How many restarts the run's model averages: 1 without train.ensemble (the best alone),
    else train.ensemble_members (0: every restart)."""
    if not cfg.train.ensemble:
        return 1
    return min(cfg.train.ensemble_members or cfg.train.restarts, cfg.train.restarts)


def init_weights(model: nn.Module, cfg: Config, seed: int, generator: torch.Generator | None = None) -> nn.Module:
    """Draw the model's starting weights for restart `seed`, from `generator` (default: a new one
    seeded train.seed + seed; the trainer passes the one that then orders that restart's data),
    so a restart trains as if alone. With model.alternate_init, odd restarts start as the paper;
    with model.stick_alternate, restarts 2, 3, 6, 7, ... start mixed attention's gates that much
    away from model.stick_init; with model.early_alternate, restarts 4-7, 12-15, ... train the later
    hops' early answers at that weight (the model's early_answers); with model.second_alternate,
    restarts 4-7, 12-15, ... mask as `second` (in the weights: the model's `second`) and train with
    halt_training right_last, and with model.second_alternate_pull the others train the later hops'
    early answers at that weight."""
    generator = generator or torch.Generator().manual_seed(cfg.train.seed + seed)
    m = cfg.model
    if not isinstance(m, MemN2NConfig):
        model.reset_parameters(generator, std=m.init_std)
        return model
    stick = m.stick_init + (m.stick_alternate if (seed // 2) % 2 == 1 else 0.0)
    if m.early_alternate >= 0:
        model.early_answers = m.early_alternate if (seed // 4) % 2 == 1 else m.early_answers
    if m.second_alternate:
        alternate = (seed // 4) % 2 == 1
        model.second.fill_(float(alternate))
        model.halt_training = "right_last" if alternate else m.halt_training
        if not alternate and m.second_alternate_pull >= 0:
            model.early_answers = m.second_alternate_pull
    if m.alternate_init and seed % 2 == 1:
        model.reset_parameters(generator, std=PAPER_INIT_STD, temporal_zero=False, stick_start=stick)
    else:
        model.reset_parameters(generator, std=m.init_std, temporal_zero=m.temporal_zero_init, stick_start=stick)
    return model


PAPER_INIT_STD = 0.1  # the paper's N(0, 0.1), for alternate_init's odd restarts


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
