"""The model registry: memnet's one extension point, for models that live outside the package.

A model type is a name (`model.type` in a config), its config dataclass and a build function:

    register("words", WordsConfig, build)        # build(cfg: Config, vocab: Vocab) -> nn.Module

memnet registers its own types (memn2n, transformer, universal) in memnet.config. A plug-in is a
module that calls `register` when imported; memnet imports the modules the environment variable
MEMNET_PLUGINS names (comma-separated) the first time it looks a model type up, so the command
line, the scripts and the library all see the same types:

    MEMNET_PLUGINS=experiments.readers memnet train --config none --model.type=words ...

A registered config dataclass is read like the package's own: unknown keys, wrong types and the
ranges of memnet.config.RANGES (by field name) are refused with a message naming the key;
`check(cfg)` adds the type's own checks (raise memnet.config.ConfigError). The model honours the
package's one interface: forward(batch) -> memnet.models.Result (docs/plugins.md).
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable

from memnet.errors import MemnetError

ENV = "MEMNET_PLUGINS"
PACKAGE = "memnet.config"  # the module that registers the package's own types


@dataclass(frozen=True)
class ModelType:
    name: str  # model.type
    config: type  # its config dataclass (its `type` field holds the name)
    build: Callable[[Any, Any], Any]  # (cfg, vocab) -> nn.Module with fresh weights
    check: Callable[[Any], None] | None  # (cfg) -> None, raising ConfigError where fields disagree
    describe: Callable[[Any], tuple[int, str]] | None  # (cfg) -> (most steps a question takes, a setting line)
    step: str  # what the report and inspect call one of the model's reading steps (hop, layer, ...)
    module: str  # the module that registered it: what MEMNET_PLUGINS must name to load it again

    @property
    def plugin(self) -> bool:
        return self.module != PACKAGE


_TYPES: dict[str, ModelType] = {}
_loaded: set[str] = set()


def register(type_name: str, config_class: type, build: Callable[[Any, Any], Any], *,
             check: Callable[[Any], None] | None = None, describe: Callable[[Any], tuple[int, str]] | None = None,
             step: str = "layer", module: str | None = None) -> None:
    """Add model type `type_name`: `config_class` is its config section (a dataclass whose fields
    have defaults; bool, int, float and str fields), `build(cfg, vocab)` its model. `module`
    (default: config_class's module) is what a checkpoint names for loading it again."""
    known = _TYPES.get(type_name)
    if known is not None and known.config is not config_class:
        raise MemnetError(f"model.type {type_name}: registered twice ({known.module} and "
                          f"{module or config_class.__module__})")
    _TYPES[type_name] = ModelType(type_name, config_class, build, check, describe, step,
                                  module or config_class.__module__)


def load_plugins() -> None:
    """Import each module MEMNET_PLUGINS names (once); MemnetError naming the one that fails."""
    for name in filter(None, (part.strip() for part in os.environ.get(ENV, "").split(","))):
        if name in _loaded:
            continue
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise MemnetError(f"{ENV}: cannot import {name} ({e}); a plug-in in this repository loads with its root "
                              f"on the path (PYTHONPATH=. or python -m memnet from there)") from None
        _loaded.add(name)


def types() -> dict[str, ModelType]:
    """Every registered model type, the plug-ins' loaded first."""
    load_plugins()
    return _TYPES


def get(type_name: str) -> ModelType | None:
    return types().get(type_name)


def how_to_load(module: str | None = None) -> str:
    """What to do about a model type nobody registered, for an error message."""
    if module:
        return f"set {ENV}={module}, the plug-in that registers it (docs/plugins.md)"
    return f"a plug-in's model type loads with {ENV}=MODULE, the module that registers it (docs/plugins.md)"
