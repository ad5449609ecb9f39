"""One checkpoint format, one loader.

A checkpoint is a plain dict, written to a temporary file and renamed (a crash never leaves
half a file), read back with torch.load(weights_only=True) (no pickled code runs):

    format       "memnet-3"
    state_dict   the model's parameters (the restart chosen on validation)
    config       the resolved Config as a dict
    vocab        {"itos": [...], "answers": [...], "question_forms": [...], "mentioned": {form: [...]}}
                 (forms and the X the story must mention: memnet.forms)
    step         optimizer steps taken
    best_metric  validation accuracy of these weights
    restarts     the restarts these weights are (the best first; several in an ensemble): each
                 model is built with its train.restart_grid entry
    plugin       only for a plug-in's model type: the module that registers it (memnet.registry),
                 named in the error when the checkpoint is loaded without it

The trainer's resume file (RUN/last.pt, see memnet.run) uses the same writer and reader with
other keys. Checkpoints of format memnet-2 (before the model was made of parts) are converted
when read.
"""
from __future__ import annotations

import io
import os
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from memnet import config as config_module
from memnet import registry
from memnet.files import atomic_write
from memnet.config import Config
from memnet.data import Vocab
from memnet.errors import MemnetError
from memnet.safe import cut
from memnet.models import build_model

FORMAT = "memnet-3"
READS = (FORMAT, "memnet-2")  # the formats read: this one, and the one before it converted (_from_format_2)


def write(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buffer)
    atomic_write(path, buffer.getvalue())


def read(path: str | os.PathLike, keys: tuple[str, ...] = ("state_dict", "config", "vocab"),
         retrain: str = "train the model again with this memnet (memnet train)") -> dict[str, Any]:
    """The checkpoint dict; MemnetError naming the file when it is missing, corrupt, foreign,
    of a format this memnet cannot read (then `retrain` says what to do), or without one of `keys`."""
    path = Path(path)
    if not path.is_file():
        raise MemnetError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch's unpickler parses the file's bytes: junk raises anything (IndexError on a text file)
        raise MemnetError(f"{path}: not a readable memnet checkpoint ({_unreadable(path, e)})") from None
    if not isinstance(payload, dict) or payload.get("format") not in READS:
        raise MemnetError(f"{path}: {_foreign(payload, retrain)}")
    for key in keys:
        if key not in payload:
            raise MemnetError(f"{path}: memnet checkpoint without {key!r}")
    if not isinstance(payload["config"], dict) or not isinstance(payload["config"].get("model", {}), dict):
        raise MemnetError(f"{path}: the checkpoint's config is not a mapping of sections")
    if payload["format"] == "memnet-2" and "state_dict" in keys:
        try:
            payload = _from_format_2(payload)
        except MemnetError as e:
            raise MemnetError(f"{path}: {e}") from None
    return payload


def _foreign(payload: Any, retrain: str) -> str:
    """What a file torch could read holds instead of a checkpoint this memnet reads, and what to do."""
    expected = f"expected a dict with format {' or '.join(map(repr, READS))}"
    if not isinstance(payload, dict):
        return f"not a memnet checkpoint ({expected}, found a {type(payload).__name__})"
    found = payload.get("format")
    if not isinstance(found, str):
        return f"not a memnet checkpoint ({expected}, found a dict without a format)"
    version = re.fullmatch(r"memnet-(\d{1,6})", found)
    if version is None:
        return f"not a memnet checkpoint ({expected}, found format {cut(found, 40)!r})"
    newer = int(version.group(1)) > int(FORMAT.split("-")[1])
    return (f"a checkpoint of format {found!r}, which this memnet cannot read (it reads {FORMAT}, and "
            f"{READS[1]} by converting it); " +
            ("a newer memnet wrote it: upgrade memnet to read it" if newer else f"an older memnet wrote it: {retrain}"))


def _unreadable(path: Path, error: Exception) -> str:
    """What the file is instead of a checkpoint, in a few words: torch's own messages advise
    loading the file without weights_only, which memnet never does."""
    if path.stat().st_size == 0:
        return "expected a file written by memnet train, found an empty file"
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as f:
            head = f.read(16)
        return f"expected a file written by memnet train (a zip archive), found one that begins {head!r}"
    if isinstance(error, pickle.UnpicklingError):
        return ("expected tensors and plain values, found a file that holds other objects; "
                "it is not loaded, since loading it could run code")
    text = str(error).strip().split("  (Could this error message be improved?")[0]
    if not text:
        return type(error).__name__
    return f"expected a file written by memnet train, found a zip archive torch cannot read: {text.splitlines()[0]}"


# memnet-2's parameter names that memnet-3 (the model of parts) renamed
_RENAMED = {"halt_w": "halting.w", "halt_b": "halting.b", "log_penalty": "masking.log_penalty", "answer_in": "answer.U",
            "answer_in_b": "answer.b", "answer_out": "answer.V", "relative": "pointer.w", "relative_q": "pointer.r",
            "stick_gate": "attention.gate"}
# memnet-2's config fields that memnet-3 has no more: the restart numbers (now train.restart_grid),
# the joint run's settings (now configs/joint.yaml), and switches dropped with the values that
# were their defaults (a checkpoint that set another value does not load)
_DROPPED = {"model": {"alternate_init": None, "stick_alternate": None, "early_alternate": None,
                      "second_alternate": None, "second_alternate_pull": None, "answer_rows": "last",
                      "answer_reads": None, "mask_linear_start": True},
            "train": {"joint_dim": None, "joint_epochs": None, "joint_lr_decay_every": None, "joint_answer_from": None,
                      "joint_relative_time": None, "joint_question_table": None, "joint_attention": None,
                      "joint_ideas": None}}


def _from_format_2(payload: dict[str, Any]) -> dict[str, Any]:
    """A memnet-2 checkpoint as memnet-3: its parameters renamed to the parts', the fields memnet-3
    dropped removed (MemnetError where one held a value memnet-3 cannot compute), and a restart
    that masked as `second` by its state's switch now masking as second by its config."""
    config = {k: dict(v) if isinstance(v, dict) else v for k, v in payload["config"].items()}
    for section, fields in _DROPPED.items():
        for name, default in fields.items():
            value = config.get(section, {}).pop(name, default)
            if default is not None and value != default:
                raise MemnetError(f"written by an earlier memnet with {section}.{name} {value}, which this version "
                                  "no longer has; retrain it")
    state = {_renamed(k): v for k, v in payload["state_dict"].items()}
    switched = [k for k in state if k == "second" or k.endswith(".second")]
    if any(float(state[k]) for k in switched):
        config["model"]["masking"] = "second"
    for k in switched:
        del state[k]
    return {**payload, "format": FORMAT, "config": config, "state_dict": state}


def _renamed(key: str) -> str:
    """A memnet-2 parameter's memnet-3 name (an ensemble's 'members.N.' kept in front)."""
    member, _, name = key.rpartition(".") if key.startswith("members.") and key.count(".") == 2 else ("", "", key)
    return f"{member}.{_RENAMED.get(name, name)}" if member else _RENAMED.get(name, name)


def model_payload(state_dict: dict[str, torch.Tensor], cfg: Config, vocab: Vocab, step: int,
                  best_metric: float, restarts: list[int] | None = None) -> dict[str, Any]:
    """What a model checkpoint holds (see the module docstring), for `write`."""
    own = registry.get(cfg.model.type)
    return {"state_dict": state_dict, "config": cfg.to_dict(), "vocab": vocab.to_dict(), "step": step,
            "best_metric": best_metric, "restarts": list(restarts) if restarts is not None else None,
            **({"plugin": own.module} if own.plugin else {})}


def save(path: str | os.PathLike, model: nn.Module, cfg: Config, vocab: Vocab, step: int, best_metric: float,
         restarts: list[int] | None = None) -> None:
    write(path, model_payload({k: v.detach().clone() for k, v in model.state_dict().items()}, cfg, vocab, step,
                              best_metric, restarts))


def load(path: str | os.PathLike) -> tuple[nn.Module, Config, Vocab, dict[str, Any]]:
    """(model in eval mode, config, vocabulary, the whole checkpoint dict)."""
    payload = read(path)
    kind = payload["config"].get("model", {}).get("type", "memn2n")
    if isinstance(payload.get("plugin"), str) and registry.get(kind) is None:
        raise MemnetError(f"{path}: model.type {kind} is a plug-in's: {registry.how_to_load(payload['plugin'])}")
    try:
        cfg = config_module.from_dict(payload["config"])
        vocab = Vocab.from_dict(payload["vocab"])
        restarts = payload.get("restarts")
        model = build_model(cfg, vocab, restarts=[int(r) for r in restarts] if restarts else None)
        if restarts:  # the config the (best) restart trained with: its grid entry applied
            cfg = config_module.restart_config(cfg, int(restarts[0]))
        model.load_state_dict(payload["state_dict"])
    except MemnetError as e:
        raise MemnetError(f"{path}: the checkpoint's config does not load ({e})") from None
    except (KeyError, TypeError, RuntimeError, AttributeError, ValueError) as e:
        raise MemnetError(f"{path}: checkpoint does not match this version of memnet ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''})") from None
    model.eval()
    return model, cfg, vocab, payload


def nonfinite(model: nn.Module) -> list[str]:
    """Names of the parameters holding NaN or infinite values."""
    return [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
