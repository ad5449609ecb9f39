"""Fast paths for training: kernels that compute what the reference model computes, faster.

A kernel module declares, as data, what it covers: COVERS maps each config field it handles
to the values it computes exactly as the reference model does (a tuple, or ANY: every value
memnet.config accepts). `choose` picks a kernel only when its declaration covers every field
of the run's resolved config, except the fields of LOOP, which the trainer's loop handles the
same way whichever path trains (the schedule, data order and random noise, the restarts, and
the starting weights, which the reference model draws). A field a kernel does not declare,
such as a new switch, is not covered: the run trains the reference model, and says why.
tests/test_kernels.py generates its tests from the declarations.
"""
from __future__ import annotations

import importlib
from typing import Any

from memnet.config import Config, ConfigError, restart_config

ANY = "any value"

# the fields every training path handles alike (memnet.trainer's loop and memnet.models.init_weights)
LOOP = {
    "data.dir", "data.task", "data.valid_fraction",
    "model.init_std", "model.temporal_zero_init", "train.restart_grid",
    "train.epochs", "train.lr", "train.lr_decay_every", "train.linear_start_epochs", "train.linear_start_lr",
    "train.random_noise", "train.restarts", "train.restart_choice", "train.hop_cost", "train.last_hop_cost", "train.ensemble", "train.ensemble_members", "train.ensemble_halting", "train.seed", "train.eval_every", "train.backend",
}

KERNELS = ["memnet.kernels.numba_memn2n"]  # modules, in order of preference


def settings(cfg: Config) -> dict[str, Any]:
    """The config as {"section.field": value}."""
    return {f"{section}.{name}": value for section, fields in cfg.to_dict().items() for name, value in fields.items()}


def uncovered(covers: dict[str, Any], cfg: Config) -> list[str]:
    """The settings of cfg, and of every restart its train.restart_grid makes, outside a
    declaration, as 'key=value' (empty: it covers the run)."""
    out: list[str] = []
    for s in range(max(len(cfg.train.restart_grid), 1)):
        for key, value in settings(restart_config(cfg, s)).items():
            allowed = covers.get(key)
            if key not in LOOP and (allowed is None or (allowed is not ANY and value not in allowed)) \
                    and f"{key}={value}" not in out:
                out.append(f"{key}={value}")
    return out


def choose(cfg: Config):
    """(kernel module or None for the reference model, why), for a resolved config.
    train.backend: auto takes the first kernel that covers the run; a kernel's name insists
    on it (ConfigError where it does not cover the run); torch takes the reference."""
    backend = cfg.train.backend
    if backend == "torch":
        return None, "train.backend is torch"
    reasons = []
    for name in KERNELS:
        kernel = importlib.import_module(name)
        if backend not in ("auto", kernel.NAME):
            continue
        outside = uncovered(kernel.COVERS, cfg)
        if not outside:
            return kernel, "its declaration covers every setting of this run"
        more = f" (and {len(outside) - 3} more)" if len(outside) > 3 else ""
        reasons.append(f"the {kernel.NAME} kernel does not cover {', '.join(outside[:3])}{more}")
    if backend != "auto":
        raise ConfigError(f"train.backend: {'; '.join(reasons)}; use auto or torch")
    return None, "; ".join(reasons)
