"""Reading and writing files so that a user's mistake reads as one line, never a traceback.

Every output goes through `atomic_write` or `atomic_open`: the bytes go to a temporary file
beside the target, which is renamed over it only once complete. A full disk, a read-only
folder or Ctrl-C leaves the previous file (or nothing), never half a file. Inputs go through
`regular_file` first: a folder, a FIFO (which would block), /dev/zero (which never ends) or a
symlink loop where a file should be is a MemnetError naming the path and what stands there.
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
import secrets
from pathlib import Path
from typing import IO, Iterator

from memnet.errors import MemnetError


def kind(path: str | os.PathLike) -> str:
    """What stands at `path`, in words: 'a regular file', 'a folder', 'a FIFO', ..."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ENOENT:
            return "a broken symbolic link" if os.path.islink(path) else "no such file or folder"
        if e.errno == errno.ELOOP:
            return "a symlink loop"
        return f"a path it cannot look at ({(e.strerror or str(e)).lower()})"  # ENOTDIR: a file on the way, EACCES
    for test, name in [(stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]:
        if test(mode):
            return name
    return "something that is not a file"


def regular_file(path: str | os.PathLike, what: str = "a regular file") -> Path:
    """`path` if it is a regular file (symlinks followed), else MemnetError: 'PATH: expected WHAT, found a folder'."""
    found = kind(path)
    if found != "a regular file":
        raise MemnetError(f"{path}: expected {what}, found {found}")
    return Path(path)


def read_text(path: str | os.PathLike, what: str = "a UTF-8 text file") -> str:
    """The file's text; MemnetError naming the file (and line) when it is not a readable UTF-8 file."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise MemnetError(f"{path}:{line}: expected UTF-8 text, found byte 0x{data[e.start]:02x}") from None


def read_bytes(path: str | os.PathLike, what: str = "a regular file") -> bytes:
    regular_file(path, what)
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise MemnetError(f"{path}: cannot read ({e.strerror or e})") from None


def _target(path: Path) -> None:
    """Refuse a target that is not a file (renaming over /dev/full as root would replace the
    device), and a folder that cannot be made because a file stands on its way."""
    if os.path.lexists(path) and (found := kind(path)) != "a regular file":
        raise MemnetError(f"{path}: expected a file to write (or no file yet), found {found}")
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if (found := kind(folder)) != "a folder":
        raise MemnetError(f"{folder}: expected a folder to write {path.name} in, found {found}")


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """A temporary file beside `path`, renamed to `path` when the block ends without error;
    on any error (and on Ctrl-C) it is removed and `path` keeps what it held. OSError (a full
    disk, a read-only folder, a file where a folder should be) becomes a MemnetError naming `path`."""
    if not os.fspath(path):  # Path('') is the current folder, which the message would name instead
        raise MemnetError("expected a file's path to write, found an empty string")
    path = Path(path)
    tmp = None
    try:
        _target(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # named before it is made (tempfile.mkstemp names it only after making it): a Ctrl-C at any
        # point leaves a name for the cleanup below; 64 random bits, so no other writer's name
        tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_umask())  # made 0600; a written file gets the usual mode
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise MemnetError(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: never a half-written file."""
    with atomic_open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
