"""The run folder: what `memnet train --out RUN` writes, and what it promises.

    RUN/config.yaml     the resolved config of the run
    RUN/metrics.jsonl   one JSON object per evaluation, then the final metrics (strict JSON:
                        a value that is not a finite number is written as null)
    RUN/model.pt        the run's model so far: the chosen restart's best weights on validation
                        (train.restart_choice; memnet.checkpoint's format)
    RUN/last.pt         everything --resume needs, written at every evaluation

The promises: every file is written to a temporary file and renamed, so a crash or an
interrupt leaves the previous version or nothing, never half a file; a folder that holds
another run is refused unless the run is continued (resume) or replaced (force: its files are
removed together, once the new run's data has loaded); a run never writes over the config
file it was started from; `saved_model` is set only once model.pt has been read back.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from memnet import checkpoint
from memnet.files import atomic_write
from memnet.config import Config
from memnet.errors import MemnetError

FILES = ("config.yaml", "metrics.jsonl", "model.pt", "last.pt")


class RunFolder:
    def __init__(self, path: str | Path, *, resume: bool = False, force: bool = False,
                 config_source: str | Path | None = None):
        if not str(path):  # Path('') is the current folder: a run would land among whatever is there
            raise MemnetError("--out: expected a run folder, found an empty string (write . for the current folder)")
        self.path, self.resume, self.force = Path(path), resume, force
        if self.path.exists() and not self.path.is_dir():
            raise MemnetError(f"{self.path}: expected a run folder, found a file")
        if config_source is not None and (self.path / "config.yaml").resolve() == Path(config_source).resolve():
            raise MemnetError(f"{self.path / 'config.yaml'}: the run would write its config over the config file it "
                              f"starts from; choose another --out")
        self.present = [name for name in FILES if (self.path / name).exists()]
        if resume and not (self.path / "last.pt").is_file():
            raise MemnetError(f"{self.path}: nothing to resume (no last.pt)")
        if self.present and not (resume or force):
            raise MemnetError(f"{self.path}: holds another run ({', '.join(self.present)}); "
                              f"--resume continues it, --force replaces it")
        self.saved_model: Path | None = None  # model.pt, once written and read back

    @property
    def model_path(self) -> Path:
        return self.path / "model.pt"

    def read_last(self) -> dict[str, Any]:
        state = checkpoint.read(self.path / "last.pt", keys=("config", "vocab"))
        if state["format"] != checkpoint.FORMAT or "states" not in state:
            raise MemnetError(f"{self.path / 'last.pt'}: written by an earlier memnet ({state['format']}); "
                              f"it cannot be resumed by this one (--force starts the run again)")
        return state

    def make(self) -> None:
        """Make the folder, and with force (not resuming) remove the files of the run it held."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise MemnetError(f"{self.path}: cannot make the run folder ({e.strerror or e})") from None
        if self.force and not self.resume:
            for name in self.present:
                (self.path / name).unlink(missing_ok=True)

    def start(self, cfg: Config) -> None:
        """Make the folder (replacing another run's files with force) and write config.yaml."""
        self.make()
        atomic_write(self.path / "config.yaml", cfg.to_yaml())

    def log(self, record: dict[str, Any]) -> None:
        """Append one line to metrics.jsonl."""
        try:
            with open(self.path / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(strict(record), allow_nan=False) + "\n")
        except OSError as e:
            raise MemnetError(f"{self.path / 'metrics.jsonl'}: cannot append ({e.strerror})") from None

    def save_model(self, payload: dict[str, Any]) -> None:
        checkpoint.write(self.model_path, payload)

    def save_last(self, payload: dict[str, Any]) -> None:
        checkpoint.write(self.path / "last.pt", payload)

    def confirm_model(self) -> Path | None:
        """model.pt when it is on disk and loads (then kept in saved_model), else None."""
        if self.model_path.is_file():
            checkpoint.load(self.model_path)
            self.saved_model = self.model_path
        return self.saved_model


def strict(value: Any) -> Any:
    """value with every float that is not finite replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value
