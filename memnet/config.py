"""Experiment configuration: nested dataclasses with defaults in code.

config.yaml holds the experiment; the command line tweaks it with dotted overrides
(``--model.hops=4 --train.lr=0.005``). The same field names are used in YAML, on the command
line, in the dataclasses and in checkpoints.

The `model` section belongs to one model type: `model.type` chooses its dataclass
(MemN2NConfig, TransformerConfig, or a plug-in's: memnet.registry), and a key of another type's
section is an error naming it. Every field is checked here, before any model or kernel sees it: unknown keys, wrong types,
choices (CHOICES) and ranges (RANGES), each with a message that names the key and what it allows.
"""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Union

import yaml

from memnet import registry
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
class MemN2NConfig:
    """End-to-End Memory Network (memnet/models/memn2n.py)."""

    type: str = "memn2n"
    dim: int = 20  # embedding size d
    hops: int = 3  # maximum number of hops K
    encoding: str = "pe"  # bow or pe (position encoding)
    temporal: bool = True  # temporal encoding T_A, T_C
    temporal_zero_init: bool = False  # T_A, T_C start at zero, so recency cannot shortcut content early on
    tying: str = "adjacent"  # adjacent or layerwise
    init_std: float = 0.1  # standard deviation of the normal the weights start from
    stopping: bool = False  # learned halting unit
    halt_cost: float = 0.01  # cost per extra hop taken, for the halting unit
    halt_threshold: float = 0.5  # at inference, stop once the halting probability passes this
    # at inference, stop only where the hop's answer is also this sure (its largest probability at
    # least this), else go on to the next hop whose halting probability passes halt_threshold:
    # training answers are known by heart, so the halting unit learns to stop at the first hop
    # whose answer is right there, where on new questions a later hop may answer better (0: off;
    # training is unchanged either way)
    halt_confidence: float = 0.0
    # the halting unit's starting bias b_h: each hop's halting probability starts near σ(b_h)
    # (-2: 0.12; -4: 0.018, which keeps the early hops' answers from steering training at d = 40)
    halt_init: float = -2.0
    # how the halting unit learns. expected: the expected answer loss over its halting distribution
    # (PonderNet in spirit); right: h_k learns whether hop k's answer is right, and the answer loss
    # trains the answer the rule gives at 1, every other hop's at early_answers; right_last: as
    # right, the last hop's answer at 1 too, the others' reaching the answer layer alone
    halt_training: str = "expected"  # expected, right or right_last
    early_answers: float = 0.05  # halt_training right*: the answer loss weight of the hops not answered from
    # hop 1's weight in place of early_answers (-1: early_answers too). A later hop's answer pulled
    # harder lets a 2-hop chain stop at hop 2 (qa2); hop 1's pulled as hard breaks the 3-hop chains (qa3)
    early_answers_hop1: float = -1.0
    # what embeds the question: tied, A^1 (the paper's B = A^1); offset, A^1 plus a table of its own
    # from zero that the question alone trains, so a question word need not pull hop 1 to every
    # memory naming it (adjacent tying only)
    question_table: str = "tied"
    # visited-memory masking: off; hard (no hop attends to a memory an earlier hop chose); soft (their
    # scores lowered by a learned penalty, mask_init below); second (soft, and hop 2 may not attend
    # to hop 1's choice at all: a 2-fact chain's second hop must move on, a later hop may return)
    masking: str = "off"
    # how a hop's scores become its attention. softmax (the paper); stick: stick-breaking from the
    # most recent memory back, p_i = σ(score_i) Π_{j more recent} (1 - σ(score_j)), what is left
    # reading nothing, so that a hop takes the latest memory that matches ("where did John go
    # last?") however far back it lies, where a softmax spreads over every memory that matches;
    # mixed: σ(g_k) stick + (1 - σ(g_k)) softmax, a learned g_k per hop from stick_init, so that
    # each hop of each task learns which it needs (a chain of "X is a frog" facts, qa16, is not the
    # latest match)
    attention: str = "softmax"
    stick_init: float = 0.0  # mixed: each g_k starts here (0: half each; -3: 95% softmax at the start)
    mask_init: float = 0.0  # soft (and second) masking: the learned penalty e^x starts at x = mask_init (0: a penalty of 1)
    # a pointer in time: hop k > 1's score of memory i adds Σ_j p^{k-1}_j w^k(age_i - age_j), a learned
    # weight per age difference from the memory the last hop read, differences beyond ± this span
    # sharing the end weights (0: off; starts at 0). "The memory just before that one" (qa3)
    relative_time: int = 0
    # the pointer's weights also read the hop's state: w^k(Δ) + r^k(Δ) · u^k, so what the last hop
    # read (a drop or a pick-up) can choose between "just before" and "the latest" (r starts at 0)
    relative_query: bool = False
    # state: â_k = softmax(W u^{k+1}) (the paper); readout: softmax(W o^k); question: softmax(W (u^1 + o^k))
    answer_from: str = "state"
    # the answer module: each hop's logits add V relu(U [u^1; o^k] + b), a nonlinear answer from the
    # question and what hop k read (V starts at 0)
    answer_hidden: int = 0  # the answer module's hidden units (0: none)
    vocabulary_softmax: bool = False  # answer classes: every vocabulary word (the paper), not only answers seen
    # an answer of several words ('n,e') has its own row of W (the paper's code), not the sum of
    # its words' rows (which gives 'n,e' and 'e,n' the same score)
    phrase_answers: bool = True  # a multi-word answer has its own row of W
    # an empty memory every hop may attend to (score 0, reads nothing), so a hop can find nothing;
    # the paper's code has it in effect (its padding slots are zero vectors the softmax includes)
    null_memory: bool = True  # an empty memory every hop may attend to (reads nothing)


@dataclass
class TransformerConfig:
    """Transformer and Universal Transformer readers (memnet/models/transformer.py)."""

    type: str = "transformer"  # transformer, or universal (one shared layer, repeated)
    dim: int = 20  # model width d
    layers: int = 2  # layers (universal: applications of the shared layer)
    heads: int = 2  # attention heads; must divide dim
    ff_dim: int = 80  # width of the feed-forward layer
    scale: bool = True  # divide attention scores by sqrt(d_k)
    # bow, pe (position encoding) or mask (the Universal Transformer paper's learned
    # multiplicative mask per word position, one for sentences and one for the question)
    encoding: str = "pe"  # how a sentence's words make its vector: bow, pe or mask
    max_words: int = 20  # encoding mask: word positions the masks cover (bAbI's longest sentence has 11)
    temporal: bool = True  # temporal encoding T(i) of each memory's age
    init_std: float = 0.1  # standard deviation of the embeddings' starting normal
    stopping: bool = False  # halting unit on the question's state after each layer
    halt_cost: float = 0.01  # cost per extra layer taken, for the halting unit
    halt_threshold: float = 0.5  # at inference, stop once the halting probability passes this
    # universal only: the Universal Transformer's dynamic halting, ACT per position (Graves
    # 2016), the question and every memory halting on their own within `layers` steps
    act: bool = False  # adaptive computation time per position (universal only)
    act_epsilon: float = 0.01  # ε: a position halts once its halting probabilities sum to 1 - ε
    ponder_cost: float = 0.01  # τ: the loss adds τ · mean over positions of N + R, per question
    vocabulary_softmax: bool = False  # answer classes: every vocabulary word, not only answers seen


def _package_model(cfg: Config, vocab: Any) -> Any:
    """The package's own models, which memnet.models.build_model builds (torch loads only there)."""
    from memnet.models import build_model
    return build_model(cfg, vocab, restarts=[0])


registry.register("memn2n", MemN2NConfig, _package_model, step="hop", module=registry.PACKAGE)
registry.register("transformer", TransformerConfig, _package_model, module=registry.PACKAGE)
registry.register("universal", TransformerConfig, _package_model, module=registry.PACKAGE)
ModelConfig = Union[MemN2NConfig, TransformerConfig]  # or a plug-in's section (memnet.registry)


def model_types() -> dict[str, type]:
    """Each model.type and its config dataclass: the package's and the loaded plug-ins' (memnet.registry)."""
    return {name: t.config for name, t in registry.types().items()}


@dataclass
class TrainConfig:
    epochs: int = 100  # epochs of the schedule (after linear start)
    batch_size: int = 32  # questions per SGD step
    lr: float = 0.01  # learning rate
    lr_decay_every: int = 25  # halve the learning rate every this many epochs
    max_grad_norm: float = 40.0  # each seed's gradient norm is clipped to this
    # linear start (LS): first this many epochs without the attention softmax, at
    # linear_start_lr; then `epochs` more with the softmax and the schedule above from lr
    # (the paper's code: 20 epochs at 0.005, then 100). 0 disables it; a model without a
    # softmax-free phase (the transformers) skips it, and the trainer says so.
    linear_start_epochs: int = 20  # epochs without the attention softmax, before `epochs`
    linear_start_lr: float = 0.005  # learning rate during linear start
    random_noise: float = 0.1  # share of empty memories inserted at training time (RN)
    attention_supervision: float = 0.0  # weight of the supporting-fact attention loss; 0 = off
    restarts: int = 1  # independent seeds; the best on validation is kept
    # overrides of model fields cycled over the restarts: restart s trains with entry s mod n applied
    # ([{}, {model.init_std: 0.1}]: the odd restarts start narrower), and the restart best on
    # validation chooses among them; empty: every restart as configured
    restart_grid: list = field(default_factory=list)
    # which restart is the best on validation: best (the highest valid accuracy at any
    # evaluation) or mean (the highest mean valid accuracy over all its evaluations, less
    # flattered by one lucky evaluation); either way the restart's best evaluation is kept
    restart_choice: str = "best"  # best or mean
    # with a stopping rule (model.stopping or model.act): restarts and epochs are chosen on the
    # valid accuracy less hop_cost times the mean hops used, so that of two equally right
    # models the one that stops sooner is kept (0.05: one hop weighs five points of accuracy)
    hop_cost: float = 0.0  # what one hop costs when choosing on valid; 0: accuracy alone
    # the same charged for the last hop alone (model.hops, or a transformer reader's layers): the
    # share of valid questions that took every hop, the rule not stopping them sooner, times this.
    # hop_cost also pays a model for stopping too soon (one that answers qa13 after hop 1, 1-5
    # points worse on valid, saves 0.9 hops); this prefers the rule that stops to one that does
    # not, and of models that stop, the more right (docs/log/2026-12-06-results.md, "A cost for the last hop alone")
    last_hop_cost: float = 0.0
    # the run's model averages the answer distributions of the restarts' best weights (its
    # attention tables are the best restart's) instead of keeping the best restart alone
    ensemble: bool = False  # the model is an ensemble of restarts
    ensemble_members: int = 0  # with ensemble: the k restarts best on valid (restart_choice; first of equals); 0: every restart
    # with ensemble and a memory network's stopping rule: members, each member answers from the hop
    # its own rule stops at; together, the ensemble stops at the first hop where more than half of the
    # members' rules say stop, and answers with the members' answers after that hop, averaged
    ensemble_halting: str = "members"
    seed: int = 0  # seed of restart 0; restart s uses seed + s
    eval_every: int = 10  # epochs between evaluations (and checkpoints)
    # torch's steps are many small operations, where more threads only wait
    threads: int = 1  # torch threads, and seeds a kernel trains at once
    device: str = "cpu"  # cpu, cuda, cuda:N or mps
    # auto: a kernel where its declaration covers the run (memnet/kernels), else the reference
    # model; numba insists on the kernel (an error where it does not cover the run); torch
    # trains the reference model
    backend: str = "auto"  # training path: auto, numba or torch


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=MemN2NConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


# fields that take one of a few words
CHOICES = {
    "model.encoding": ("bow", "pe", "mask"),
    "model.tying": ("adjacent", "layerwise"),
    "model.masking": ("off", "hard", "soft", "second"),
    "model.answer_from": ("state", "readout", "question"),
    "model.halt_training": ("expected", "right", "right_last"),
    "model.question_table": ("tied", "offset"),
    "model.attention": ("softmax", "stick", "mixed"),
    "train.backend": ("auto", "numba", "torch"),
    "train.restart_choice": ("best", "mean"),
    "train.ensemble_halting": ("members", "together"),
}


def _finite(test: Callable[[float], bool]) -> Callable[[float], bool]:
    return lambda v: math.isfinite(v) and test(v)


# fields with a range: (what the message says, the test)
RANGES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "data.memory_size": (">= 1", lambda v: v >= 1),
    "data.valid_fraction": ("between 0 and 1 (exclusive)", _finite(lambda v: 0 < v < 1)),
    "model.dim": (">= 1", lambda v: v >= 1),
    "model.hops": ("between 1 and 20", lambda v: 1 <= v <= 20),
    "model.layers": ("between 1 and 20", lambda v: 1 <= v <= 20),
    "model.heads": (">= 1", lambda v: v >= 1),
    "model.ff_dim": (">= 1", lambda v: v >= 1),
    "model.init_std": ("a finite number > 0", _finite(lambda v: v > 0)),
    "model.halt_cost": ("a finite number >= 0", _finite(lambda v: v >= 0)),
    "model.halt_threshold": ("between 0 and 1", _finite(lambda v: 0 <= v <= 1)),
    "model.halt_confidence": ("between 0 and 1", _finite(lambda v: 0 <= v <= 1)),
    "model.halt_init": ("a finite number", _finite(lambda v: True)),
    "model.early_answers": ("a finite number >= 0", _finite(lambda v: v >= 0)),
    "model.early_answers_hop1": ("-1 (as model.early_answers) or a finite number >= 0",
                                 _finite(lambda v: v >= 0 or v == -1)),
    "model.mask_init": ("a finite number", _finite(lambda v: True)),
    "model.stick_init": ("a finite number", _finite(lambda v: True)),
    "model.relative_time": ("between 0 and 1000", lambda v: 0 <= v <= 1000),
    "model.answer_hidden": (">= 0", lambda v: v >= 0),
    "model.max_words": (">= 1", lambda v: v >= 1),
    "model.act_epsilon": ("between 0 (inclusive) and 1", _finite(lambda v: 0 <= v < 1)),
    "model.ponder_cost": ("a finite number >= 0", _finite(lambda v: v >= 0)),
    "train.epochs": (">= 1", lambda v: v >= 1),
    "train.batch_size": (">= 1", lambda v: v >= 1),
    "train.lr": ("a finite number > 0", _finite(lambda v: v > 0)),
    "train.lr_decay_every": (">= 1", lambda v: v >= 1),
    "train.max_grad_norm": ("a finite number > 0", _finite(lambda v: v > 0)),
    "train.linear_start_epochs": (">= 0", lambda v: v >= 0),
    "train.linear_start_lr": ("a finite number > 0", _finite(lambda v: v > 0)),
    "train.random_noise": ("between 0 (inclusive) and 1", _finite(lambda v: 0 <= v < 1)),
    "train.attention_supervision": ("a finite number >= 0", _finite(lambda v: v >= 0)),
    "train.hop_cost": ("between 0 and 1", _finite(lambda v: 0 <= v <= 1)),
    "train.last_hop_cost": ("between 0 and 1", _finite(lambda v: 0 <= v <= 1)),
    "train.restarts": ("between 1 and 1000", lambda v: 1 <= v <= 1000),
    "train.ensemble_members": (">= 0", lambda v: v >= 0),
    "train.seed": (">= 0", lambda v: v >= 0),
    "train.eval_every": (">= 1", lambda v: v >= 1),
    "train.threads": ("between 1 and 256", lambda v: 1 <= v <= 256),
    "train.device": ("cpu, cuda, cuda:N or mps", lambda v: re.fullmatch(r"cpu|cuda(:\d+)?|mps", v) is not None),
}


def field_help(cls: type) -> dict[str, str]:
    """Each field of a config dataclass with the comment that explains it in this file: the one
    on its line, else the first sentence of the block above it."""
    out, block = {}, []
    for line in inspect.getsource(cls).splitlines():
        text = line.strip()
        if text.startswith("#"):
            block.append(text.lstrip("# "))
            continue
        field_line = re.match(r"(\w+): [^=]+= [^#]+?(?:#\s*(.+))?$", text)
        if field_line:
            name, comment = field_line.groups()
            out[name] = comment or re.split(r"(?<=\.)\s", " ".join(block))[0].rstrip(".")
        block = []
    return {name: text for name, text in out.items() if text}


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
    elif typ is list:  # the restart grid: a YAML list, or its text from the command line
        if isinstance(value, str):
            try:
                value = yaml.safe_load(value)
            except yaml.YAMLError:
                pass
        if isinstance(value, list):
            return value
        return _fail(key, "a list", value)
    else:
        raise ConfigError(f"{key}: unsupported field type {typ}")
    return _fail(key, typ.__name__, value)


def _fail(key: str, expected: str, value: Any) -> Any:
    raise ConfigError(f"{key}: expected {expected}, found {value!r}")


def _update(obj: Any, values: Any, prefix: str, owner: str = "") -> None:
    """Set obj's fields from a mapping, checking names, types and choices. `owner` names what
    obj is a section of, for the message about a key it does not have."""
    if not isinstance(values, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, found {values!r}")
    hints = typing.get_type_hints(type(obj))
    fields = [f.name for f in dataclasses.fields(obj)]
    for name, value in values.items():
        key = prefix + str(name)
        if name not in fields:
            elsewhere = [t for t, c in model_types().items() if name in {f.name for f in dataclasses.fields(c)}]
            if owner and elsewhere:
                raise ConfigError(f"{key}: a setting of model.type {' and '.join(elsewhere)}, not of {owner} "
                                  f"(its settings: {', '.join(fields)})")
            raise ConfigError(f"unknown config key {key!r} (known: {', '.join(prefix + f for f in fields)})")
        current = getattr(obj, name)
        if dataclasses.is_dataclass(current):
            _update(current, value, key + ".")
            continue
        value = _coerce(value, hints[name], key)
        if key in CHOICES and value not in CHOICES[key]:
            raise ConfigError(f"{key}: expected one of {', '.join(CHOICES[key])}; found {value!r}")
        setattr(obj, name, value)


def check_ranges(cfg: Config, ranges: dict[str, tuple[str, Callable[[Any], bool]]]) -> None:
    """Each field `ranges` names ('section.field': (what the message says, the test)) that cfg has, within its range."""
    for key, (allowed, test) in ranges.items():
        section, name = key.split(".")
        part = getattr(cfg, section)
        if hasattr(part, name) and not test(getattr(part, name)):
            raise ConfigError(f"{key}: expected {allowed}, found {getattr(part, name)!r}")


def check(cfg: Config) -> Config:
    """Every ranged field within its range, and the fields that constrain each other (a plug-in's
    model type: its own check too, memnet.registry)."""
    check_ranges(cfg, RANGES)
    if cfg.train.ensemble_members and not cfg.train.ensemble:
        raise ConfigError(f"train.ensemble_members: {cfg.train.ensemble_members} members need train.ensemble true "
                          f"(found false: the run's model would be the best restart alone)")
    if cfg.train.ensemble_members > cfg.train.restarts:
        raise ConfigError(f"train.ensemble_members: expected at most train.restarts ({cfg.train.restarts}), "
                          f"found {cfg.train.ensemble_members}")
    model = cfg.model
    if cfg.train.ensemble_halting == "together" and not (cfg.train.ensemble and isinstance(model, MemN2NConfig)
                                                        and model.stopping):
        raise ConfigError("train.ensemble_halting: together stops an ensemble where most of its members' stopping "
                          "rules say stop; it needs train.ensemble true and a memory network with model.stopping true, "
                          f"found train.ensemble {str(cfg.train.ensemble).lower()}, model.type {model.type}"
                          + (f", model.stopping {str(model.stopping).lower()}" if isinstance(model, MemN2NConfig) else ""))
    for key in ("hop_cost", "last_hop_cost"):
        if getattr(cfg.train, key) and not (getattr(model, "stopping", False) or getattr(model, "act", False)):
            raise ConfigError(f"train.{key}: {getattr(cfg.train, key)} charges the hops a model stops after; it "
                              "needs model.stopping true (or model.act true), found both false: every question "
                              "takes every hop")
    if isinstance(model, MemN2NConfig) and model.halt_confidence and not model.stopping:
        raise ConfigError(f"model.halt_confidence: {model.halt_confidence} is a condition of the stopping rule; it "
                          "needs model.stopping true, found false: every question takes every hop")
    if isinstance(model, MemN2NConfig) and model.encoding == "mask":
        raise ConfigError("model.encoding: mask is the transformer readers' (model.type transformer or universal); "
                          "a memn2n model takes bow or pe")
    if isinstance(model, MemN2NConfig) and model.question_table != "tied" and model.tying != "adjacent":
        raise ConfigError(f"model.question_table: {model.question_table} unties the question's table B from A^1; it "
                          f"needs model.tying adjacent, found {model.tying} (which has a B of its own)")
    if isinstance(model, TransformerConfig) and model.dim % model.heads:
        raise ConfigError(f"model.heads: expected a divisor of model.dim ({model.dim}), found {model.heads}")
    if isinstance(model, TransformerConfig) and model.act and model.type != "universal":
        raise ConfigError("model.act: ACT halts each position of one shared layer applied again and again; "
                          f"it needs model.type universal, found {model.type}")
    if isinstance(model, TransformerConfig) and model.act and model.stopping:
        raise ConfigError("model.act and model.stopping: two halting rules (per position and per question); "
                          "choose one")
    own = registry.get(model.type)
    if own is not None and own.check is not None:
        own.check(cfg)
    for i in range(len(cfg.train.restart_grid)):
        restart_config(cfg, i)
    return cfg


def restart_config(cfg: Config, restart: int) -> Config:
    """The config restart `restart` trains with: cfg with its train.restart_grid entry (restart
    mod the grid's length) applied, and no grid of its own. Without a grid, cfg itself."""
    grid = cfg.train.restart_grid
    if not grid:
        return cfg
    i = restart % len(grid)
    entry, where = grid[i], f"train.restart_grid[{i}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping of model fields to values, such as "
                          f"{{model.init_std: 0.1}}; found {entry!r}")
    for key in entry:
        if not isinstance(key, str) or not key.startswith("model.") or key == "model.type":
            raise ConfigError(f"{where}: {key!r}: a restart may set model fields (model.KEY), other than model.type")
    values = cfg.to_dict()
    values["train"]["restart_grid"] = []
    try:
        return from_dict(merge(values, entry))
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def grid_label(cfg: Config, restart: int) -> str:
    """What restart `restart`'s grid entry sets, as 'model.KEY=VALUE, ...' ('' without one)."""
    grid = cfg.train.restart_grid
    entry = grid[restart % len(grid)] if grid else {}
    return ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in entry.items())


def from_dict(values: dict[str, Any] | None) -> Config:
    """A checked Config from a nested mapping (a YAML file's, or a checkpoint's)."""
    values = dict(values or {})
    model = values.pop("model", {})
    if not isinstance(model, dict):
        raise ConfigError(f"model: expected a mapping, found {model!r}")
    kind = _coerce(model.get("type", "memn2n"), str, "model.type")
    types = model_types()
    if kind not in types:
        raise ConfigError(f"model.type: expected one of {', '.join(types)}; found {kind!r} "
                          f"({registry.how_to_load()})")
    cfg = Config(model=types[kind](type=kind))
    _update(cfg, values, "")
    _update(cfg.model, model, "model.", owner=kind)
    return check(cfg)


def load(path: str | Path | None = None, overrides: list[str] | dict[str, Any] | None = None) -> Config:
    """Defaults, then the YAML file (if any), then dotted overrides ('model.hops=4' or {'model.hops': 4})."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except OSError as e:
            raise ConfigError(f"{path}: cannot read config ({e.strerror})") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path}: expected a UTF-8 text file, found byte {e.object[e.start]:#04x} "
                              f"at offset {e.start}") from None
        except yaml.YAMLError as e:
            raise ConfigError(_yaml_error(path, e)) from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level, found {type(values).__name__}")
    try:
        return from_dict(merge(values, overrides or []))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}" if path is not None and _from_file(e, overrides) else str(e)) from None


def _yaml_error(path: str | Path, error: yaml.YAMLError) -> str:
    """'FILE:LINE:COLUMN: not valid YAML: what the parser expected and found (while ...)', on one line."""
    mark = getattr(error, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    return f"{where}: not valid YAML: {problem}" + (f" ({context})" if context else "")


def _from_file(error: ConfigError, overrides: list[str] | dict[str, Any] | None) -> bool:
    """Whether the key a message names came from the file rather than an override."""
    given = overrides.keys() if isinstance(overrides, dict) else [_split_override(o)[0] for o in overrides or []]
    return not any(str(error).startswith(k + ":") or f"'{k}'" in str(error) for k in given)


def merge(values: dict[str, Any], overrides: list[str] | dict[str, Any]) -> dict[str, Any]:
    """A nested mapping with dotted overrides applied on top (a copy)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in values.items()}
    items = overrides.items() if isinstance(overrides, dict) else (_split_override(o) for o in overrides)
    for key, value in items:
        *parents, leaf = key.split(".")
        node = out
        for parent in parents:
            child = node.get(parent)
            node[parent] = dict(child) if isinstance(child, dict) else {}
            node = node[parent]
        node[leaf] = value
    return out


def apply_overrides(cfg: Config, overrides: list[str] | dict[str, Any]) -> Config:
    """A new Config: cfg with dotted overrides applied."""
    return from_dict(merge(cfg.to_dict(), overrides))


def _split_override(text: str) -> tuple[str, str]:
    key, sep, value = text.removeprefix("--").partition("=")
    if not sep or not key:
        raise ConfigError(f"override: expected --section.key=value, found {text!r}")
    return key, value


ROOT = Path(__file__).resolve().parents[1]  # the repository (config.yaml, configs/)


def presets() -> dict[str, Path]:
    """The named presets: configs/NAME.yaml here and in the repository (here first), and
    'default', config.yaml."""
    found: dict[str, Path] = {}
    for root in (ROOT, Path.cwd()):
        found.update({p.stem: p for p in sorted((root / "configs").glob("*.yaml"))})
        if (root / "config.yaml").is_file():
            found["default"] = root / "config.yaml"
    return found


def find_preset(name: str) -> Path:
    """--config's file: a YAML file's path, or a preset's name (presets())."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise ConfigError(f"{name}: no such config file")
        return path
    known = presets()
    if name in known:
        return known[name]
    near = difflib.get_close_matches(name, list(known), n=1)
    raise ConfigError(f"--config {name}: no such preset or file" + (f"; did you mean {near[0]}?" if near else "")
                      + f" (presets: {', '.join(sorted(known))})")
