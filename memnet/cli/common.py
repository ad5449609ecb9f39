"""What the commands that read a trained model share: where the checkpoint and the data are."""
from __future__ import annotations

import argparse
from pathlib import Path

from memnet.errors import MemnetError

CHECKPOINT_HELP = "a trained model: RUN/model.pt, or the run folder RUN"


def checkpoint_file(arg: str) -> Path:
    """--checkpoint: a run folder stands for its model.pt (an argparse type)."""
    if not arg:  # Path('') is the current folder
        raise argparse.ArgumentTypeError("expected a checkpoint file or a run folder, found an empty string")
    path = Path(arg)
    try:
        return path / "model.pt" if path.is_dir() and (path / "model.pt").exists() else path
    except OSError:  # a name too long to look up: loading it says so
        return path


def data_folder(given: str | None, stored: str, checkpoint: str | Path) -> str:
    """--data, else the folder the model was trained on. Runs store it absolute; an older run
    stored it as typed, which means nothing from another working directory."""
    if given:
        return given
    if not stored:
        raise MemnetError(f"{checkpoint}: the model names no data folder: give --data DIR")
    if not Path(stored).is_dir():
        relative = " (a path relative to wherever the model was trained)" if not Path(stored).is_absolute() else ""
        raise MemnetError(f"{checkpoint}: the model's data folder {stored!r}{relative} is not a folder here: "
                          "give --data DIR")
    return stored
