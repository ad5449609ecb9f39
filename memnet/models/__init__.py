"""One interface for every model: `build_model(cfg, vocab)` and the `Result` of `forward`.

Every model takes a memnet.data.Batch of B questions (fields (B, ...), see memnet.data) and
returns a Result; the loss is there when the batch holds answers. Models are built with
keyword-only constructors from their own config section (memnet.config.MemN2NConfig,
TransformerConfig, or a plug-in's: memnet.registry) and hold one seed: restarts are several models
(see memnet.trainer).
"""
from __future__ import annotations

import torch
from torch import nn

from memnet import registry
from memnet.config import Config, MemN2NConfig, TransformerConfig, restart_config
from memnet.data import Vocab
from memnet.models.ensemble import Ensemble
from memnet.models.memn2n import MemN2N
from memnet.models.result import HALT_REASONS, Result
from memnet.models.transformer import Transformer

__all__ = ["HALT_REASONS", "Ensemble", "MemN2N", "Result", "Transformer", "build_model", "ensemble_size", "init_weights",
           "n_parameters", "restart_model"]


def build_model(cfg: Config, vocab: Vocab, *, restarts: list[int] | None = None) -> nn.Module:
    """The model cfg.model.type names, for this vocabulary, with fresh weights (seed 0): restart
    restarts[0]'s (its train.restart_grid entry applied), or with several restarts an Ensemble of
    theirs (default: restarts 0 .. ensemble_size(cfg) - 1; a checkpoint names the ones it holds)."""
    restarts = list(range(ensemble_size(cfg))) if restarts is None else restarts
    if len(restarts) > 1:
        return Ensemble([build_model(cfg, vocab, restarts=[s]) for s in restarts], cfg.train.ensemble_halting)
    cfg = restart_config(cfg, restarts[0])
    m = cfg.model
    if isinstance(m, MemN2NConfig):
        return MemN2N(m, vocab_size=len(vocab), answer_words=vocab.answer_words(), memory_size=cfg.data.memory_size,
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
    """Draw the starting weights of restart `seed` (model.init_std and, for a memory network,
    model.temporal_zero_init, as its train.restart_grid entry sets them) from `generator`
    (default: a new one seeded train.seed + seed; the trainer passes the one that then orders
    that restart's data), so a restart trains as if alone."""
    generator = generator or torch.Generator().manual_seed(cfg.train.seed + seed)
    m = restart_config(cfg, seed).model
    if isinstance(m, MemN2NConfig):
        model.reset_parameters(generator, std=m.init_std, temporal_zero=m.temporal_zero_init)
    else:
        model.reset_parameters(generator, std=m.init_std)
    return model


def restart_model(cfg: Config, vocab: Vocab, seed: int, generator: torch.Generator | None = None) -> nn.Module:
    """Restart `seed`'s model with its starting weights (build_model, then init_weights)."""
    return init_weights(build_model(cfg, vocab, restarts=[seed]), cfg, seed, generator)


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
