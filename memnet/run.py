"""The run folder: what `memnet train --out RUN` writes, and what it promises.

    RUN/config.yaml     the resolved config of the run
    RUN/metrics.jsonl   one JSON object per evaluation, then the final metrics (strict JSON:
                        a value that is not a finite number is written as null)
    RUN/model.pt        the run's model so far: the chosen restart's best weights on validation
                        (train.restart_choice; memnet.checkpoint's format)
    RUN/last.pt         everything --resume needs, written at every evaluation
    RUN/lock            while a run writes the folder: its process id and host

The promises: every file is written to a temporary file and renamed, so a crash or an
interrupt leaves the previous version or nothing, never half a file; a folder that holds
another run is refused unless the run is continued (resume) or replaced (force: its files are
removed together, once the new run's data has loaded); a folder that another run is writing
now (its lock names a live process) is refused, whatever the flags, before anything is written
or removed; a run never writes over the config file it was started from; `saved_model` is set
only once model.pt has been read back.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
from pathlib import Path
from typing import Any, Iterator

from memnet import checkpoint
from memnet.files import atomic_write, kind
from memnet.safe import cut
from memnet.config import Config
from memnet.errors import MemnetError

FILES = ("config.yaml", "metrics.jsonl", "model.pt", "last.pt")
LOCK = "lock"


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
        self.locked = False  # whether this object took RUN/lock (lock), to remove it at the end (release)
        if self.path.is_dir():  # before the other checks: "another run is writing it" is the reason to give
            self.refuse_if_busy()
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
        state = checkpoint.read(self.path / "last.pt", keys=("config", "vocab"),
                                retrain="it cannot be resumed by this one (--force starts the run again)")
        if state["format"] != checkpoint.FORMAT or "states" not in state:
            raise MemnetError(f"{self.path / 'last.pt'}: written by an earlier memnet ({state['format']}); "
                              f"it cannot be resumed by this one (--force starts the run again)")
        return state

    def _mkdir(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise MemnetError(f"{self.path}: cannot make the run folder ({e.strerror or e})") from None

    def holder(self) -> str | None:
        """Who holds RUN/lock, in words ('pid 123', 'pid 123 on host h'), or None: no lock, or a
        stale one (its process, on this host, has ended: killed, or the machine restarted)."""
        path = self.path / LOCK
        found = kind(path)
        if found == "no such file or folder":
            return None
        if found != "a regular file":  # not memnet's: reading a FIFO would block
            raise MemnetError(f"{path}: expected a run's lock file, found {found}; remove it to write this run folder")
        try:
            pid, _, host = path.read_text(encoding="utf-8", errors="replace").strip().partition(" ")
        except FileNotFoundError:  # released between the look and the read
            return None
        except OSError as e:
            return f"a lock it cannot read ({e.strerror})"
        if not pid.isdigit() or not host:  # being written this instant, or not memnet's
            return "a process its lock does not name"
        if host != socket.gethostname():  # another machine's process cannot be looked at from here
            return f"pid {pid} on host {cut(host, 40)}"
        return f"pid {pid}" if _alive(int(pid)) else None

    def refuse_if_busy(self, who: str | None = None) -> None:
        """MemnetError when a live run holds RUN/lock (`who` names it when already known)."""
        who = who or self.holder()
        if who is not None:
            raise MemnetError(f"{self.path}: another memnet train ({who}) is writing this run folder now; wait for it "
                              f"to end, or choose another --out (if no run is writing it, remove {self.path / LOCK})")

    def lock(self) -> None:
        """Make the folder and take RUN/lock for this process, created only where none exists
        (O_EXCL): a second run into the folder is refused before it writes or removes anything.
        A stale lock (holder) is taken over."""
        self._mkdir()
        with _serialised(self.path):  # two runs that find one stale lock take it over in turn, not both
            self.refuse_if_busy()
            (self.path / LOCK).unlink(missing_ok=True)  # none, or a stale one
            try:
                fd = os.open(self.path / LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:  # taken in between by a process that does not serialise
                self.refuse_if_busy(self.holder() or "a process that took the lock just now")
            except OSError as e:
                raise MemnetError(f"{self.path / LOCK}: cannot write ({e.strerror or e})") from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(f"{os.getpid()} {socket.gethostname()}\n")
        self.locked = True

    def release(self) -> None:
        """Remove RUN/lock if this object took it."""
        if self.locked:
            (self.path / LOCK).unlink(missing_ok=True)
            self.locked = False

    def make(self) -> None:
        """Make the folder, and with force (not resuming) remove the files of the run it held."""
        self._mkdir()
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


def _alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine (another user's counts)."""
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, only the lookup is made
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:  # not a process id at all
        return False
    return True


@contextlib.contextmanager
def _serialised(folder: Path) -> Iterator[None]:
    """An exclusive flock on the folder itself for the block (released when its descriptor closes)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def strict(value: Any) -> Any:
    """value with every float that is not finite replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value
