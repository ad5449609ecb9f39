"""One checkpoint format, one loader.

A checkpoint is a plain dict, written to a temporary file and renamed (a crash never leaves
half a file), read back with torch.load(weights_only=True) (no pickled code runs):

    format       "memnet-2"
    state_dict   the model's parameters (the restart chosen on validation)
    config       the resolved Config as a dict
    vocab        {"itos": [...], "answers": [...], "question_forms": [...], "mentioned": {form: [...]}}
                 (forms and the X the story must mention: memnet.forms)
    step         optimizer steps taken
    best_metric  validation accuracy of these weights
    mixture      only in a mixture of two readers (`memnet mix`): {"config", "vocab"} of reader B
                 and "readers", the two run folders; config and vocab above are reader A's, and
                 state_dict holds both readers and the gate (memnet.models.mixture)

The trainer's resume file (RUN/last.pt, see memnet.run) uses the same writer and reader with
other keys. Checkpoints of format memnet-1 (a seed dimension on every parameter, one flat
model section) are converted when read.
"""
from __future__ import annotations

import dataclasses
import io
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from memnet import config as config_module
from memnet.files import atomic_write
from memnet.config import MODEL_TYPES, Config, MemN2NConfig
from memnet.data import Vocab
from memnet.errors import MemnetError
from memnet.models import Mixture, build_model
from memnet.models.mixture import word_map

FORMAT = "memnet-2"


def write(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buffer)
    atomic_write(path, buffer.getvalue())


def read(path: str | os.PathLike, keys: tuple[str, ...] = ("state_dict", "config", "vocab")) -> dict[str, Any]:
    """The checkpoint dict; MemnetError naming the file when it is missing, corrupt, foreign or
    without one of `keys`."""
    path = Path(path)
    if not path.is_file():
        raise MemnetError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch's unpickler parses the file's bytes: junk raises anything (IndexError on a text file)
        raise MemnetError(f"{path}: not a readable memnet checkpoint ({_unreadable(path, e)})") from None
    if not isinstance(payload, dict) or payload.get("format") not in (FORMAT, "memnet-1"):
        raise MemnetError(f"{path}: not a memnet checkpoint (expected a dict with format {FORMAT!r})")
    for key in keys:
        if key not in payload:
            raise MemnetError(f"{path}: memnet checkpoint without {key!r}")
    if not isinstance(payload["config"], dict) or not isinstance(payload["config"].get("model", {}), dict):
        raise MemnetError(f"{path}: the checkpoint's config is not a mapping of sections")
    if payload["format"] == "memnet-1" and "state_dict" in keys:
        payload = _from_format_1(payload)
    return payload


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


# switches added after memnet-1 checkpoints were first written, with the behaviour of a
# checkpoint that predates them (the dataclass default may differ: it is for new runs)
_BEFORE = {"null_memory": False, "vocabulary_softmax": False, "phrase_answers": False}


def _from_format_1(payload: dict[str, Any]) -> dict[str, Any]:
    """A memnet-1 checkpoint as memnet-2: its model section cut to its type's fields, the seed
    dimension dropped, and the memory network's tables split out of their side-by-side layout."""
    model = {**_BEFORE, **payload["config"]["model"]}
    kind = model.get("type", "memn2n")
    fields = {f.name for f in dataclasses.fields(MODEL_TYPES.get(kind, MemN2NConfig))}
    config = {**payload["config"], "model": {k: v for k, v in model.items() if k in fields}}
    state = {k: v[0] if isinstance(v, torch.Tensor) and v.dim() > 0 else v.reshape(1) for k, v in payload["state_dict"].items()}
    if kind == "memn2n" and "emb" in state:  # (V, n_tables * d) -> (n_tables, V, d)
        n, d = (model.get("hops", 3) + 1) if model.get("tying", "adjacent") == "adjacent" else 4, model.get("dim", 20)
        state["tables"] = state.pop("emb").view(-1, n, d).transpose(0, 1).contiguous()
        if "temporal" in state:
            state["temporal"] = state["temporal"].view(-1, n, d).transpose(0, 1).contiguous()
    for name in ("halt_b", "log_penalty"):
        if name in state:
            state[name] = state[name].reshape(1)
    return {**payload, "format": FORMAT, "config": config, "state_dict": state}


def model_payload(state_dict: dict[str, torch.Tensor], cfg: Config, vocab: Vocab, step: int,
                  best_metric: float) -> dict[str, Any]:
    """What a model checkpoint holds (see the module docstring), for `write`."""
    return {"state_dict": state_dict, "config": cfg.to_dict(), "vocab": vocab.to_dict(), "step": step,
            "best_metric": best_metric}


def save(path: str | os.PathLike, model: nn.Module, cfg: Config, vocab: Vocab, step: int, best_metric: float) -> None:
    write(path, model_payload({k: v.detach().clone() for k, v in model.state_dict().items()}, cfg, vocab, step,
                              best_metric))


def load(path: str | os.PathLike) -> tuple[nn.Module, Config, Vocab, dict[str, Any]]:
    """(model in eval mode, config, vocabulary, the whole checkpoint dict)."""
    payload = read(path)
    try:
        cfg = config_module.from_dict(payload["config"])
        vocab = Vocab.from_dict(payload["vocab"])
        model = build_model(cfg, vocab)
        if "mixture" in payload:
            b_cfg, b_vocab = config_module.from_dict(payload["mixture"]["config"]), Vocab.from_dict(payload["mixture"]["vocab"])
            model = Mixture(model, build_model(b_cfg, b_vocab), word_map(vocab, b_vocab), (cfg.model.type, b_cfg.model.type))
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
