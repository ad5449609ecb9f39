"""Experiment configuration: nested dataclasses with defaults in code.

config.yaml holds the experiment; the command line tweaks it with dotted overrides
(``--model.hops=4 --train.lr=0.005``). Unknown keys and wrong types are rejected with a
message that names the key. The same field names are used in YAML, on the command line,
in the dataclasses and in checkpoints.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memnet.errors import MemnetError


class ConfigError(MemnetError):
    pass


@dataclass
class DataConfig:
    dir: str = ""  # folder of bAbI files (official en/, en-valid/, or generated)
    task: str = "16"  # a task spec: 16, 1-20, 1,2,16 or chain
    memory_size: int = 50  # the most recent sentences kept as memory
    valid_fraction: float = 0.1  # share of train held out when the folder has no valid split


@dataclass
class ModelConfig:
    type: str = "memn2n"  # memn2n, transformer or universal (a shared transformer layer, repeated)
    dim: int = 20  # embedding size d
    hops: int = 3  # maximum number of hops K
    encoding: str = "pe"  # bow or pe (position encoding)
    temporal: bool = True  # temporal encoding T_A, T_C
    temporal_zero_init: bool = False  # T_A, T_C start at zero, so recency cannot shortcut content early on
    tying: str = "adjacent"  # adjacent or layerwise
    init_std: float = 0.1  # standard deviation of the normal the weights start from
    # memory network: whatever init_std and temporal_zero_init say; the best seed on validation chooses
    alternate_init: bool = False  # odd seeds start as the paper: N(0, 0.1), random T(i)
    stopping: bool = False  # learned halting unit
    halt_cost: float = 0.01  # cost per extra hop taken, for the halting unit
    halt_threshold: float = 0.5  # at inference, stop once the halting probability passes this
    masking: str = "off"  # visited-memory masking: off, hard or soft
    answer_from: str = "state"  # state: â_k = softmax(W u^{k+1}) (the paper); readout: â_k = softmax(W o^k)
    vocabulary_softmax: bool = False  # answer classes: every vocabulary word (the paper), not only answers seen
    # an answer of several words ('n,e') has its own row of W (the paper's code), not the sum of
    # its words' rows (which gives 'n,e' and 'e,n' the same score)
    phrase_answers: bool = True  # a multi-word answer has its own row of W
    # an empty memory every hop may attend to (score 0, reads nothing), so a hop can find nothing;
    # the paper's code has it in effect (its padding slots are zero vectors the softmax includes)
    null_memory: bool = True  # an empty memory every hop may attend to (reads nothing)
    # transformer reader
    layers: int = 2
    heads: int = 2
    ff_dim: int = 80
    scale: bool = True  # divide attention scores by sqrt(d_k)


@dataclass
class TrainConfig:
    epochs: int = 100
    batch_size: int = 32  # questions per SGD step
    lr: float = 0.01
    lr_decay_every: int = 25  # halve the learning rate every this many epochs
    max_grad_norm: float = 40.0  # each seed's gradient norm is clipped to this
    # linear start (LS): first this many epochs without the attention softmax, at
    # linear_start_lr; then `epochs` more with the softmax and the schedule above from lr
    # (the paper's code: 20 epochs at 0.005, then 100). 0 disables it.
    linear_start_epochs: int = 20  # epochs without the attention softmax, before `epochs`
    linear_start_lr: float = 0.005  # learning rate during linear start
    random_noise: float = 0.1  # share of empty memories inserted at training time (RN)
    attention_supervision: float = 0.0  # weight of the supporting-fact attention loss; 0 = off
    restarts: int = 1  # independent seeds; the best on validation is kept
    seed: int = 0
    eval_every: int = 10
    # joint training (data.task names several tasks) uses these instead of model.dim,
    # train.epochs and train.lr_decay_every: the paper's d = 50 and its shorter schedule
    joint_dim: int = 50
    joint_epochs: int = 60
    joint_lr_decay_every: int = 15
    # torch's steps are many small operations, where more threads only wait
    threads: int = 1  # torch threads, and seeds the compiled loop trains at once
    device: str = "cpu"
    # auto: the compiled loop where it covers the model, else torch's step; numba or torch
    # insists on one (numba fails clearly where it does not cover the model)
    backend: str = "auto"  # training step: auto, numba (memnet.fast) or torch


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


# fields that take one of a few words
CHOICES = {
    "model.type": ("memn2n", "transformer", "universal"),
    "model.encoding": ("bow", "pe"),
    "model.tying": ("adjacent", "layerwise"),
    "model.masking": ("off", "hard", "soft"),
    "model.answer_from": ("state", "readout"),
    "train.backend": ("auto", "numba", "torch"),
}


def _coerce(value: Any, typ: Any, key: str) -> Any:
    """Check `value` against a field's type, converting strings from the command line."""
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            return value.lower() in ("true", "yes", "1", "on")
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
    elif typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif typ is str:
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    else:
        raise ConfigError(f"{key}: unsupported field type {typ}")
    raise ConfigError(f"{key}: expected {typ.__name__}, found {value!r}")


def _update(obj: Any, values: dict[str, Any], prefix: str = "") -> None:
    if not isinstance(values, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, found {values!r}")
    hints = typing.get_type_hints(type(obj))
    fields = {f.name for f in dataclasses.fields(obj)}
    for name, value in values.items():
        key = prefix + str(name)
        if name not in fields:
            raise ConfigError(f"unknown config key {key!r} (known: {', '.join(sorted(prefix + f for f in fields))})")
        current = getattr(obj, name)
        if dataclasses.is_dataclass(current):
            _update(current, value, key + ".")
        else:
            value = _coerce(value, hints[name], key)
            if key in CHOICES and value not in CHOICES[key]:
                raise ConfigError(f"{key}: expected one of {', '.join(CHOICES[key])}; found {value!r}")
            setattr(obj, name, value)


def from_dict(values: dict[str, Any] | None) -> Config:
    cfg = Config()
    _update(cfg, values or {})
    return cfg


def load(path: str | Path | None = None, overrides: list[str] | dict[str, Any] | None = None) -> Config:
    """Defaults, then the YAML file (if any), then dotted overrides ('model.hops=4' or {'model.hops': 4})."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except OSError as e:
            raise ConfigError(f"{path}: cannot read config ({e.strerror})") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML ({e})") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level, found {type(values).__name__}")
    cfg = from_dict(values)
    apply_overrides(cfg, overrides or [])
    return cfg


def apply_overrides(cfg: Config, overrides: list[str] | dict[str, Any]) -> Config:
    items = overrides.items() if isinstance(overrides, dict) else (_split_override(o) for o in overrides)
    for key, value in items:
        *parents, leaf = key.split(".")
        nested: dict[str, Any] = {leaf: value}
        for parent in reversed(parents):
            nested = {parent: nested}
        _update(cfg, nested)
    return cfg


def _split_override(text: str) -> tuple[str, str]:
    key, sep, value = text.removeprefix("--").partition("=")
    if not sep or not key:
        raise ConfigError(f"override: expected --section.key=value, found {text!r}")
    return key, value
