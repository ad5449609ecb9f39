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
    # whatever init_std and temporal_zero_init say; the best seed on validation chooses
    alternate_init: bool = False  # odd seeds start as the paper: N(0, 0.1), random T(i)
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
    # (PonderNet in spirit); right: h_k learns whether hop k's answer is right (a cross-entropy on
    # the states with no gradient back into them), and every hop's answer is trained: the one the
    # rule gives (the first hop whose h_k passes halt_threshold, or the last) at weight 1, every
    # other at early_answers, so that an early hop's answer can become one worth stopping on; a
    # small weight keeps the early answers from pulling the hops off their chain; right_last: as
    # right, with the last hop's answer at weight 1 too, and the other hops' answers at
    # early_answers with their inputs' gradient stopped (they train the answer layer, steer no hop);
    # right_own: as right, with each of those answers steering its own hop alone: its gradient
    # reaches the hop's attention and read-out but stops at the hop's input (u^k, and the question
    # in its state), so that hop 2's answer can teach hop 2 to find it without pulling hop 1 off a
    # longer chain (answer_from question or readout; an answer module's answer_reads current or product)
    halt_training: str = "expected"  # expected (the expected loss), right, right_last or right_own
    early_answers: float = 0.05  # halt_training right*: the answer loss weight of the hops not answered from
    # hop 1's weight in place of early_answers (-1: early_answers too). A later hop's answer pulled
    # harder lets a 2-hop chain stop at hop 2 (qa2); hop 1's pulled as hard breaks the 3-hop chains (qa3)
    early_answers_hop1: float = -1.0
    # restarts 4-7, 12-15, ... (restart s with s // 4 odd) train the later hops' answers at this
    # weight instead of early_answers (hop 1's stays), so that each of alternate_init's and
    # stick_alternate's starts meets both, and the restart best on validation chooses per task
    # between a pull that lets a 2-fact chain stop at hop 2 (qa2) and none, which leaves a 3-fact
    # chain's middle hop free (qa3) (-1: off, every restart at early_answers)
    early_alternate: float = -1.0
    # restarts 4-7, 12-15, ... (restart s with s // 4 odd) mask as `second` does and train with
    # halt_training right_last, the others as set (masking soft, halt_training right), so that the
    # restart best on validation chooses per task between the early answers steering the hops (a
    # 1-fact yes/no question, counting) and a chain whose middle hop must move on (qa3). Which one a
    # restart took is in its weights (a `second` entry of its state), so its checkpoint answers as it trained
    second_alternate: bool = False
    # with second_alternate: the weight of the later hops' early answers in the restarts it leaves
    # soft (0-3, 8-11, ...), where those answers steer the hops (hop 1's stays early_answers_hop1).
    # The switched restarts keep early_answers, which trains their answer layer alone, and a 2-fact
    # chain that stops at hop 2 (qa2) can take one of them; 0 leaves a 3-fact chain's middle hop
    # in the soft restarts free of the pull (qa3) (-1: early_answers, as every restart before)
    second_alternate_pull: float = -1.0
    # whose rows each hop's answer reads: last, the answer words' rows of C^K for every hop (the
    # paper's W^T = C^K); own, hop k's of its own output table C^k, the table its read-out was made
    # of, so that a hop that read the answer's sentence can give it untrained (adjacent tying only)
    answer_rows: str = "last"
    # what embeds the question: tied, A^1 (the paper's adjacent tying, B = A^1); own, a table B of
    # its own, a copy of A^1 at the start, trained apart from it, so that a word of the question
    # need not pull the first hop to every memory that names it; offset, A^1 plus a table of its
    # own from zero that the question alone trains: tied at the start, following A^1 as the memories
    # train it, with room to move apart (adjacent tying only)
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
    # mixed: restarts 2, 3, 6, 7, ... (restart s with s // 2 odd) start their g_k at stick_init plus
    # this, the others at stick_init, so that each of alternate_init's two initialisations meets
    # both starts and the restart best on validation chooses (0: every restart at stick_init)
    stick_alternate: float = 0.0
    mask_init: float = 0.0  # soft (and second) masking: the learned penalty e^x starts at x = mask_init (0: a penalty of 1)
    # soft (and second) masking's penalty during linear start too. There p_i is the score itself, so
    # lowering a chosen memory's score by e^x does not lower its share: it reads -e^x times that
    # memory's output into o^k, whatever the hop's scores are. false: no penalty until the softmax
    # comes in (second's hop 2 stays blocked from hop 1's choice either way)
    mask_linear_start: bool = True
    # a pointer in time: hop k > 1's score of memory i adds Σ_j p^{k-1}_j w^k(age_i - age_j), a learned
    # weight per age difference from the memory the last hop read, differences beyond ± this span
    # sharing the end weights (0: off; starts at 0). "The memory just before that one" (qa3)
    relative_time: int = 0
    # the pointer's weights also read the hop's state: w^k(Δ) + r^k(Δ) · u^k, so what the last hop
    # read (a drop or a pick-up) can choose between "just before" and "the latest" (r starts at 0)
    relative_query: bool = False
    # state: â_k = softmax(W u^{k+1}) (the paper); readout: softmax(W o^k); question: softmax(W (u^1 + o^k))
    answer_from: str = "state"
    # the answer module: each hop's logits add V relu(U x + b), a nonlinear answer from the
    # question and the read-outs answer_reads names (V starts at 0)
    answer_hidden: int = 0  # the answer module's hidden units (0: none)
    # what hop k's answer module reads: all (u^1, o^1..o^k), current (u^1, o^k), product
    # (u^1, o^k and their elementwise product u^1 ⊙ o^k) or sum (u^1, o^k and s^k = Σ_i σ(score_i + b_k) relu(C^k x_i),
    # hop k's sentences, without their ages, summed, each through a gate on its score: how many, and which, facts matched)
    answer_reads: str = "all"
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
    return build_model(cfg, vocab, restart=True)


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
    # not, and of models that stop, the more right (docs/results.md, "A cost for the last hop alone")
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
    # joint training (data.task names several tasks) uses these instead of model.dim,
    # train.epochs, train.lr_decay_every and a memory network's model.answer_from,
    # model.relative_time, model.question_table and model.attention: the paper's d = 50 and its
    # shorter schedule, no pointer in time, the question embedded by A^1, the softmax
    joint_dim: int = 50  # model.dim of a joint run
    joint_epochs: int = 60  # train.epochs of a joint run
    joint_lr_decay_every: int = 15  # train.lr_decay_every of a joint run
    joint_answer_from: str = "state"  # model.answer_from of a joint memory network
    joint_relative_time: int = 0  # model.relative_time of a joint memory network
    joint_question_table: str = "tied"  # model.question_table of a joint memory network
    joint_attention: str = "softmax"  # model.attention of a joint memory network
    # whether a joint memory network keeps memnet's two ideas as the model sets them. false: the
    # stopping rule and visited-memory masking off in a joint run, with every field that tunes
    # them (IDEAS below) at its default, so that config.yaml's joint run is the one measured
    # without them (its single-task runs have them on)
    joint_ideas: bool = True
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
    "model.answer_reads": ("all", "current", "product", "sum"),
    "model.halt_training": ("expected", "right", "right_last", "right_own"),
    "model.answer_rows": ("last", "own"),
    "model.question_table": ("tied", "own", "offset"),
    "model.attention": ("softmax", "stick", "mixed"),
    "train.joint_answer_from": ("state", "readout", "question"),
    "train.joint_question_table": ("tied", "own", "offset"),
    "train.joint_attention": ("softmax", "stick", "mixed"),
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
    "model.early_alternate": ("-1 (off) or a finite number >= 0", _finite(lambda v: v >= 0 or v == -1)),
    "model.second_alternate_pull": ("-1 (as model.early_answers) or a finite number >= 0",
                                    _finite(lambda v: v >= 0 or v == -1)),
    "model.mask_init": ("a finite number", _finite(lambda v: True)),
    "model.stick_init": ("a finite number", _finite(lambda v: True)),
    "model.stick_alternate": ("a finite number", _finite(lambda v: True)),
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
    "train.joint_dim": (">= 1", lambda v: v >= 1),
    "train.joint_relative_time": ("between 0 and 1000", lambda v: 0 <= v <= 1000),
    "train.joint_epochs": (">= 1", lambda v: v >= 1),
    "train.joint_lr_decay_every": (">= 1", lambda v: v >= 1),
    "train.threads": ("between 1 and 256", lambda v: 1 <= v <= 256),
    "train.device": ("cpu, cuda, cuda:N or mps", lambda v: re.fullmatch(r"cpu|cuda(:\d+)?|mps", v) is not None),
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
    if isinstance(model, MemN2NConfig) and model.stopping and model.halt_training == "right_own" and (
            model.answer_from not in ("question", "readout") or (model.answer_hidden and model.answer_reads not in ("current", "product"))):
        raise ConfigError("model.halt_training: right_own stops each early answer's gradient at its hop's input; it needs "
                          f"model.answer_from question or readout (found {model.answer_from}) and, with an answer module, "
                          f"model.answer_reads current or product (found {model.answer_reads}): else hop k's answer "
                          "reads the earlier hops' states directly")
    if isinstance(model, MemN2NConfig) and model.second_alternate and not (
            model.masking == "soft" and model.stopping and model.halt_training == "right" and model.early_alternate == -1):
        raise ConfigError("model.second_alternate: restarts 4-7 switch soft masking to second and halt_training right "
                          "to right_last; it needs model.masking soft, model.stopping true, model.halt_training right "
                          f"and model.early_alternate -1 (which alternates restarts 4-7 too), found {model.masking}, "
                          f"{str(model.stopping).lower()}, {model.halt_training} and {model.early_alternate} "
                          "(--model.second_alternate=false --model.second_alternate_pull=-1 turns it off)")
    if isinstance(model, MemN2NConfig) and model.second_alternate_pull != -1 and not model.second_alternate:
        raise ConfigError(f"model.second_alternate_pull: {model.second_alternate_pull} weighs the later hops' early answers "
                          "in the restarts model.second_alternate leaves soft; it needs model.second_alternate true, "
                          "found false (-1 turns it off)")
    if isinstance(model, MemN2NConfig) and model.encoding == "mask":
        raise ConfigError("model.encoding: mask is the transformer readers' (model.type transformer or universal); "
                          "a memn2n model takes bow or pe")
    if isinstance(model, MemN2NConfig) and model.answer_rows == "own" and model.tying != "adjacent":
        raise ConfigError("model.answer_rows: own reads each hop's answer through its own output table C^k; "
                          f"it needs model.tying adjacent, found {model.tying} (one C for every hop)")
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
    return cfg


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


# each joint setting, and the field of the resolved config it sets (the memory network's fields:
# for model.type memn2n alone)
JOINT = {"joint_dim": "model.dim", "joint_epochs": "train.epochs", "joint_lr_decay_every": "train.lr_decay_every",
         "joint_answer_from": "model.answer_from", "joint_relative_time": "model.relative_time",
         "joint_question_table": "model.question_table", "joint_attention": "model.attention"}
MEMN2N_ONLY = {"joint_answer_from", "joint_relative_time", "joint_question_table", "joint_attention"}
# the fields of memnet's two ideas, the stopping rule and visited-memory masking: what
# train.joint_ideas false sets to their defaults in a joint memory network
IDEAS = ("model.stopping", "model.halt_cost", "model.halt_threshold", "model.halt_confidence", "model.halt_init",
         "model.halt_training", "model.early_answers", "model.early_answers_hop1", "model.early_alternate",
         "model.second_alternate", "model.second_alternate_pull", "model.masking", "model.mask_init",
         "model.mask_linear_start", "train.hop_cost", "train.last_hop_cost")


def resolve(cfg: Config, n_tasks: int) -> Config:
    """The config a run actually uses: joint training on several tasks takes the joint settings."""
    cfg = from_dict(cfg.to_dict())  # a copy
    if n_tasks > 1:
        for joint, target in JOINT.items():
            if joint not in MEMN2N_ONLY or isinstance(cfg.model, MemN2NConfig):
                section, name = target.split(".")
                setattr(getattr(cfg, section), name, getattr(cfg.train, joint))
        if not cfg.train.joint_ideas and isinstance(cfg.model, MemN2NConfig):
            defaults = Config()  # a memory network's defaults
            for target in IDEAS:
                section, name = target.split(".")
                setattr(getattr(cfg, section), name, getattr(getattr(defaults, section), name))
    return check(cfg)


def stored(values: dict[str, Any], n_tasks: int) -> Config:
    """The Config of a run's stored, resolved config (RUN/last.pt): for a joint run, each joint
    setting added since the run was written takes the value the run resolved to, instead of
    today's default, so that resolving the config again gives the run it was."""
    values = {section: dict(fields) if isinstance(fields, dict) else fields for section, fields in values.items()}
    train = values.get("train")
    if n_tasks > 1 and isinstance(train, dict):
        for joint, target in JOINT.items():
            section, name = target.split(".")
            if joint not in train and isinstance(values.get(section), dict) and name in values[section]:
                train[joint] = values[section][name]
    return from_dict(values)
