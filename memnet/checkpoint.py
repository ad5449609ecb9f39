"""One checkpoint format, one loader.

A checkpoint is a plain dict, written to a temporary file and renamed (a crash never leaves
half a file), read back with torch.load(weights_only=True) (no pickled code runs):

    format       "memnet-1"
    state_dict   the model's parameters (one seed: the restart chosen on validation)
    config       the resolved Config as a dict
    vocab        {"itos": [...], "answers": [...]}
    step         optimizer steps taken
    best_metric  validation accuracy of these weights

The trainer's resume file (RUN/last.pt) uses the same writer and reader with more keys.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from memnet import config as config_module
from memnet.babi import atomic_write
from memnet.config import Config
from memnet.data import Vocab
from memnet.errors import MemnetError
from memnet.model import build_model

FORMAT = "memnet-1"


def write(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **payload}, buffer)
    atomic_write(path, buffer.getvalue())


# switches added after checkpoints were first written, with the behaviour of a checkpoint
# that predates them (the dataclass default may differ: it is for new runs)
_BEFORE = {"model": {"null_memory": False, "vocabulary_softmax": False, "phrase_answers": False}}


def read(path: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint dict; MemnetError naming the file when it is missing, corrupt or foreign."""
    path = Path(path)
    if not path.is_file():
        raise MemnetError(f"{path}: no such checkpoint file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch's unpickler parses the file's bytes: junk raises anything (IndexError on a text file)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise MemnetError(f"{path}: not a readable memnet checkpoint ({first})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise MemnetError(f"{path}: not a memnet checkpoint (expected a dict with format {FORMAT!r})")
    for key in ("state_dict", "config", "vocab"):
        if key not in payload:
            raise MemnetError(f"{path}: memnet checkpoint without {key!r}")
    for section, fields in _BEFORE.items():
        if isinstance(payload["config"].get(section), dict):
            payload["config"][section] = {**fields, **payload["config"][section]}
    return payload


def save(path: str | os.PathLike, model: nn.Module, cfg: Config, vocab: Vocab, step: int, best_metric: float) -> None:
    write(path, {"state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
                 "config": cfg.to_dict(), "vocab": vocab.to_dict(), "step": step, "best_metric": best_metric})


def load(path: str | os.PathLike) -> tuple[nn.Module, Config, Vocab, dict[str, Any]]:
    """(model in eval mode, config, vocabulary, the whole checkpoint dict)."""
    payload = read(path)
    try:
        cfg = config_module.from_dict(payload["config"])
        vocab = Vocab.from_dict(payload["vocab"])
        model = build_model(cfg.model, len(vocab), len(vocab.answers), answer_words=vocab.answer_words(),
                            memory_size=cfg.data.memory_size, seeds=1)
        model.load_state_dict(payload["state_dict"])
    except (MemnetError, KeyError, TypeError, RuntimeError) as e:
        raise MemnetError(f"{path}: checkpoint does not match this version of memnet ({e})") from None
    model.eval()
    return model, cfg, vocab, payload
