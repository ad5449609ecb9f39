"""The official bAbI v1.2 release: fetching it, checking it, finding it again.

`memnet data download` fetches tasks_1-20_v1-2.tar.gz (about 11.7 MB) from the first mirror
that serves a good copy, and unpacks it into DIR/tasks_1-20_v1-2/ (DIR: --dir, else
$MEMNET_DATA, else ~/.cache/memnet), one folder per set:

    en/  en-10k/  hn/  hn-10k/  shuffled/  shuffled-10k/    qaN_<name>_train.txt, qaN_<name>_test.txt
    en-valid/  en-valid-10k/                                 qaN_train.txt, qaN_valid.txt, qaN_test.txt

What is unpacked is checked by content, not by the archive's own bytes, so a repack of the
same files passes. Every one of the 360 expected files must be there, and each is checked before
it is written (check_file): a file of en/ and en-valid/ must have the SHA-256 listed in
memnet/official_manifest.py; a file of the other sets, whose hashes we do not know, must read as
bAbI stories with babi's strict reader, hold questions, cite as many supporting facts as the task
its name gives (SUPPORTING), and not repeat another file of its set. A partial or altered archive
is refused naming its first bad file and what is wrong with it. Only the expected files (and the
release's README.txt and LICENSE.txt) are written, each to a path built from our own list, never
from a name in the archive; an archive with a member that is absolute, climbs out with "..", is
a link where a file is expected, or is larger than any file of the release is refused. Everything
is unpacked into a temporary folder beside the target and renamed into place only when all of it
passed: a failed or interrupted download leaves nothing behind.

Anywhere a command takes a data folder, a set name (`--data en-valid`) with no such folder
in the working directory stands for the downloaded copy: resolve_data_dir.
"""
from __future__ import annotations

import argparse
import bz2
import difflib
import errno
import gzip
import hashlib
import http.client
import lzma
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

from memnet import __version__
from memnet.babi import TASK_NAMES, BabiFormatError, parse_bytes
from memnet.errors import MemnetError
from memnet.official_manifest import SHA256

ARCHIVE = "tasks_1-20_v1-2.tar.gz"
RELEASE = "tasks_1-20_v1-2"  # the archive's top folder, kept as the folder's name on disk
# The mirrors people use, tried in order. The first two are where most code fetches it from
# (Keras' S3 bucket, Jason Weston's page); the third is Facebook's file server.
MIRRORS = (
    "https://s3.amazonaws.com/text-datasets/babi_tasks_1-20_v1-2.tar.gz",
    "http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz",
    "https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz",
)
SETS = ("en", "en-10k", "hn", "hn-10k", "shuffled", "shuffled-10k", "en-valid", "en-valid-10k")
EXTRAS = ("README.txt", "LICENSE.txt")  # unpacked when the archive has them; not required
TIMEOUT = 30  # seconds without an answer before a mirror counts as unreachable
CHUNK = 1 << 16
MAX_FILE = 64 << 20  # bytes; the release's largest file has a few MB, so a larger member is not one of them
# How many supporting facts each question of a task cites, counted over all 2,000 questions of
# each task in en/ (and en-valid/, the same stories): always this many, except counting (7) and
# lists (8), which cite one to eight. The 10k, hn and shuffled sets are not in our reference copy,
# so a file is held to what *most* of its questions cite: a rare exception there cannot refuse the
# real release, while the stories of another task, or none, are still refused.
SUPPORTING = {1: 1, 2: 2, 3: 3, 4: 1, 5: 1, 6: 1, 9: 1, 10: 1, 11: 2, 12: 1, 13: 2, 14: 2, 15: 2,
              16: 3, 17: 2, 18: 2, 19: 2, 20: 1}


class _BadCopy(MemnetError):
    """No good copy from this source (a mirror unreachable, an HTTP error, a broken or foreign
    archive): the next mirror may have one."""


def expected_files() -> list[str]:
    """The 360 files of the release, relative to its top folder: en/qa1_single-supporting-fact_train.txt, ..."""
    files = []
    for name in SETS:
        for task, slug in TASK_NAMES.items():
            if name.startswith("en-valid"):
                files += [f"{name}/qa{task}_{split}.txt" for split in ("train", "valid", "test")]
            else:
                files += [f"{name}/qa{task}_{slug}_{split}.txt" for split in ("train", "test")]
    return files


def data_home() -> Path:
    """Where downloads go by default: $MEMNET_DATA, else ~/.cache/memnet."""
    return Path(os.environ.get("MEMNET_DATA") or Path.home() / ".cache" / "memnet")


def release_dir(home: str | os.PathLike | None = None) -> Path:
    """The unpacked release: HOME/tasks_1-20_v1-2 (it holds en/, en-valid/, ...)."""
    return Path(home if home is not None else data_home()) / RELEASE


def official_dir(checkout: str | os.PathLike) -> Path:
    """The official bAbI data (a folder holding en/ and en-valid/) for a checkout's scripts and
    tests: $MEMNET_BABI_DIR when set; else the shared folder beside the checkout (../shared/babi,
    as CI lays it out) when it exists; else the copy `memnet data download` made, when there is one."""
    if os.environ.get("MEMNET_BABI_DIR"):
        return Path(os.environ["MEMNET_BABI_DIR"])
    shared = Path(checkout).parent / "shared" / "babi"
    if shared.is_dir():
        return shared
    return release_dir() if release_dir().is_dir() else shared


def resolve_data_dir(text: str) -> str:
    """A --data value: a path that exists is used as given; a set name (en-valid, hn-10k, ...)
    with no such folder here stands for the downloaded copy of that set. Anything else is a
    MemnetError that lists the set names, suggests the nearest and says how to download them:
    a misspelled name (en-vaild) and a folder that only exists elsewhere (../shared/babi/en-valid)
    both get the name they meant."""
    if os.path.lexists(text):  # whatever stands there (a file, a broken link): the command says what it is
        return text
    if text in SETS:
        folder = release_dir() / text
        if folder.is_dir():
            return str(folder)
        raise MemnetError(f"{text}: no such folder here, and the official set {text} is not downloaded to "
                          f"{release_dir()}: `memnet data download` fetches it (--dir or $MEMNET_DATA: elsewhere)")
    name = Path(text).name
    nearest = name if name in SETS else next(iter(difflib.get_close_matches(name.lower(), SETS, n=1, cutoff=0.6)), None)
    meant = f"did you mean {nearest}? " if nearest else ""
    shown = text if len(text) <= 80 else text[:79] + "…"
    raise MemnetError(f"{shown}: no such data folder, nor an official set's name ({', '.join(SETS)}); {meant}"
                      "`memnet data download` fetches the official sets, then --data takes their names")


def data_dir_arg(text: str) -> str:
    """resolve_data_dir as an argparse type (for the scripts): a bad value becomes argparse's usage error."""
    try:
        return resolve_data_dir(text)
    except MemnetError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def download(home: str | os.PathLike | None = None, urls: Iterable[str] = MIRRORS,
             archive: str | os.PathLike | None = None, force: bool = False,
             progress: bool | None = None, say: Callable[[str], None] = print,
             manifest: Mapping[str, str] | None = None) -> Path:
    """Fetch (or take `archive`), check and unpack the release into HOME/tasks_1-20_v1-2; returns
    that folder. Tries each URL in turn until one gives a good copy; raises MemnetError with
    every mirror's reason when none does. `progress`: a tqdm bar (None: only on a terminal);
    `manifest`: the hashes to check (default: official_manifest.SHA256)."""
    target = release_dir(home)
    if target.exists() and not force:
        # a cheap look, not the full check: a copy made by a memnet that took empty stand-ins is caught
        missing = [f for f in expected_files() if not (target / f).is_file() or not (target / f).stat().st_size]
        if missing:
            raise MemnetError(f"{target}: expected a complete download, found {len(missing)} of "
                              f"{len(expected_files())} files missing or empty (first: {missing[0]}); "
                              "--force replaces it")
        again = f"--from {archive} --force replaces it" if archive is not None else "--force downloads it again"
        say(f"{target}: already downloaded ({', '.join(SETS)}); {again}")
        return target
    if archive is not None and not os.path.isfile(archive):  # before any folder is made
        raise MemnetError(f"{archive}: expected the archive {ARCHIVE}, found no such file")
    _mkdir(target.parent)
    work = Path(_writing(target.parent, lambda: tempfile.mkdtemp(prefix=".download-", dir=target.parent)))
    try:
        unpacked = work / RELEASE
        if archive is not None:
            counts = unpack(archive, unpacked, manifest)
            say(f"read {archive}")
        else:
            counts = _from_mirrors(list(urls), work, unpacked, progress, say, manifest)
        _replace(unpacked, target, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    hashed, read, skipped = counts
    say(f"wrote {target}: {', '.join(SETS)} ({hashed + read} files: {hashed} checked by SHA-256, "
        f"{read} read as bAbI stories" + (f"; {skipped} other file(s) in the archive skipped" if skipped else "") + ")")
    return target


def _from_mirrors(urls: list[str], work: Path, unpacked: Path, progress: bool | None,
                  say: Callable[[str], None], manifest: Mapping[str, str] | None) -> tuple[int, int, int]:
    if not urls:
        raise MemnetError("no URL to download from")
    failures = []
    for url in urls:
        path = work / ARCHIVE
        try:
            size = fetch(url, path, progress)
        except _BadCopy as e:
            failures.append(f"{url}: {e}")
            continue
        try:
            counts = unpack(path, unpacked, manifest, name=url)
        except _BadCopy as e:  # names the URL already
            failures.append(str(e))
            shutil.rmtree(unpacked, ignore_errors=True)
            continue
        say(f"downloaded {url} ({size / 1e6:.1f} MB)")
        return counts
    raise MemnetError(f"could not download {ARCHIVE} from any mirror ({'; '.join(failures)}); "
                      "--from FILE takes an archive you already have")


def fetch(url: str, path: Path, progress: bool | None = None) -> int:
    """Download `url` to `path` with a tqdm bar; returns the bytes received. A network or HTTP
    failure raises _BadCopy; a failure to write (a full disk) raises MemnetError."""
    from tqdm import tqdm

    request = urllib.request.Request(url, headers={"User-Agent": f"memnet/{__version__}"})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as e:
        raise _BadCopy(f"HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        reason = e.reason.strerror if isinstance(e.reason, OSError) and e.reason.strerror else e.reason
        raise _BadCopy(str(reason).lower()) from None
    except (OSError, ValueError) as e:  # a timeout, a reset connection, a URL that is not one
        raise _BadCopy(str(e) or type(e).__name__) from None
    length = response.headers.get("Content-Length")
    total = int(length) if length and length.isdigit() else None
    received = 0
    with response, _opened(path) as out, tqdm(total=total, unit="B", unit_scale=True, desc=ARCHIVE,
                                              disable=None if progress is None else not progress) as bar:
        while True:
            try:
                chunk = response.read(CHUNK)
            except (OSError, ValueError, http.client.HTTPException) as e:
                raise _BadCopy(f"connection broke after {received} bytes ({e or type(e).__name__})") from None
            if not chunk:
                break
            _writing(path, lambda: out.write(chunk))
            received += len(chunk)
            bar.update(len(chunk))
    if total is not None and received < total:
        raise _BadCopy(f"connection closed after {received} of {total} bytes")
    return received


def unpack(archive: str | os.PathLike, out: Path, manifest: Mapping[str, str] | None = None,
           name: str | None = None) -> tuple[int, int, int]:
    """Check the release's files in `archive` and write them under `out` (see the module's
    docstring); returns (files checked by hash, files read as stories, other files skipped).
    `manifest`: the hashes to hold them to (default: official_manifest.SHA256). A bad archive
    raises _BadCopy naming `name` (default: the archive's path)."""
    manifest = SHA256 if manifest is None else manifest
    where = name or str(archive)
    expected = expected_files()
    wanted = set(expected) | set(EXTRAS)
    digests: dict[str, str] = {}  # file -> SHA-256, for each file that passed check_file
    problems: dict[str, str] = {}  # file -> what is wrong with it
    seen: set[str] = set()
    skipped = 0
    try:
        with _decompressed(archive) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                rel = _relative(member.name, where)
                if rel not in wanted:
                    skipped += not member.isdir()
                    continue
                if not member.isfile():
                    raise _BadCopy(f"{where}: member {member.name} is a link or a folder, expected a file")
                if rel in seen:
                    raise _BadCopy(f"{where}: member {member.name} appears twice")
                seen.add(rel)
                if member.size > MAX_FILE:  # read whole below: a hostile size must not fill the memory
                    raise _BadCopy(f"{where}: member {member.name} holds {member.size} bytes, expected a file "
                                   f"of the release (each under {MAX_FILE >> 20} MB)")
                data = tar.extractfile(member).read()
                if rel in EXTRAS or not (problem := check_file(rel, data, manifest)):
                    _write(out / rel, data)
                    digests[rel] = hashlib.sha256(data).hexdigest()
                else:
                    problems[rel] = problem
            while stream.read(CHUNK):  # to the end: the check sums of gzip, bzip2 and xz come last
                pass
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as e:
        head = _head(archive)
        if not head.startswith(COMPRESSED) and head[257:262] != b"ustar":  # e.g. a mirror's HTML page
            raise _BadCopy(f"{where}: expected a tar archive (gzip, bzip2, xz or plain), found a file that is "
                           f"not one (it begins {head[:32]!r})") from None
        raise _BadCopy(f"{where}: expected a complete tar archive, found a broken one ({e})") from None
    except OSError as e:  # writing raised MemnetError already: this is reading
        if e.errno is None:  # gzip, bz2 and lzma report a corrupt stream as an OSError without errno
            raise _BadCopy(f"{where}: expected a complete tar archive, found a broken one ({e})") from None
        raise MemnetError(f"{where}: cannot read ({(e.strerror or str(e)).lower()})") from None
    missing = [f for f in expected if f not in seen]
    if missing:
        raise _BadCopy(f"{where}: expected the bAbI v1.2 release, found {len(missing)} of its "
                       f"{len(expected)} files missing (first: {RELEASE}/{missing[0]})")
    first: dict[tuple[str, str], str] = {}  # (set, SHA-256) -> the first file of that set with those bytes
    for rel in expected:
        if rel in digests and rel not in manifest:  # a file copied over another of its task or set
            other = first.setdefault((rel.split("/")[0], digests[rel]), rel)
            if other != rel:
                problems[rel] = (f"{RELEASE}/{rel}: expected stories of its own, found the same bytes as "
                                 f"{RELEASE}/{other}")
    bad = [problems[f] for f in expected if f in problems]
    if bad:
        raise _BadCopy(f"{where}: {bad[0]}" + (f" (and {len(bad) - 1} more bad files)" if len(bad) > 1 else ""))
    hashed = sum(1 for f in manifest if f in seen)
    return hashed, len(expected) - hashed, skipped


def check_file(rel: str, data: bytes, manifest: Mapping[str, str] | None = None) -> str | None:
    """What is wrong with `data` as the release's file `rel` (en/qa1_single-supporting-fact_train.txt),
    in one line that names it; None when nothing is. A file in `manifest` (default:
    official_manifest.SHA256) must have its SHA-256. Any other must read as bAbI stories with
    babi's strict reader (UTF-8, well formed), hold questions, and most of its questions must cite
    as many supporting facts as those of the task its name gives (SUPPORTING)."""
    manifest = SHA256 if manifest is None else manifest
    shown = f"{RELEASE}/{rel}"
    if rel in manifest:
        digest = hashlib.sha256(data).hexdigest()
        if digest == manifest[rel]:
            return None
        return (f"{shown} differs from the official file (SHA-256 {digest[:16]}..., "
                f"expected {manifest[rel][:16]}...)")
    if not data.strip():
        return f"{shown}: expected bAbI stories, found an empty file" if not data else \
            f"{shown}: expected bAbI stories, found only blank space"
    try:
        stories = parse_bytes(data, shown)
    except BabiFormatError as e:
        return str(e)
    cited = Counter(len(q.support) for story in stories for q in story.questions)
    if not cited:
        n = len(stories)
        return f"{shown}: expected stories with questions, found no question in {n} stor{'y' if n == 1 else 'ies'}"
    task = int(re.match(r"qa(\d+)_", rel.rsplit("/", 1)[-1]).group(1))
    want, most = SUPPORTING.get(task), cited.most_common(1)[0][0]
    if want is not None and most != want:
        return (f"{shown}: expected task {task} ({TASK_NAMES[task]}), whose questions cite {want} supporting "
                f"fact{'s' * (want > 1)} each, found questions citing mostly {most}")
    return None


# the first bytes of a gzip, bzip2 and xz stream, and how to open each
COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
_OPENERS = dict(zip(COMPRESSED, (gzip.open, bz2.open, lzma.open)))


def _head(archive: str | os.PathLike) -> bytes:
    """The archive's first 512 bytes (a tar header's length)."""
    with open(archive, "rb") as f:
        return f.read(512)


def _decompressed(archive: str | os.PathLike) -> BinaryIO:
    """The archive's tar stream, through the decompressor its first bytes name (gzip, bzip2, xz or
    none); these check the archive's length and check sum when read to the end."""
    head = _head(archive)
    opener = next((o for magic, o in _OPENERS.items() if head.startswith(magic)), open)
    return opener(archive, "rb")


def _relative(member: str, where: str) -> str:
    """A member's path inside the release folder ('' when outside it); refuses unsafe names."""
    parts = member.replace("\\", "/").split("/")
    if member.startswith("/") or ".." in parts:
        raise _BadCopy(f"{where}: member {member!r} points outside the archive's folder")
    parts = [p for p in parts if p not in ("", ".")]
    return "/".join(parts[1:]) if parts and parts[0] == RELEASE else ""


def _write(path: Path, data: bytes) -> None:
    _mkdir(path.parent)
    with _opened(path) as out:
        _writing(path, lambda: out.write(data))


def _replace(new: Path, target: Path, work: Path) -> None:
    """Put the checked folder at `target`. An older copy is moved aside into `work` (deleted with
    it) and put back if anything, an interrupt included, stops the swap half-way."""
    old = work / "replaced"
    if target.exists():
        _writing(target, lambda: os.rename(target, old))
    try:
        _writing(target, lambda: os.rename(new, target))
    except BaseException:
        if old.exists() and not target.exists():
            os.rename(old, target)
        raise


def _mkdir(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise MemnetError(f"{folder}: expected a folder, found a file")
    _writing(folder, lambda: folder.mkdir(parents=True, exist_ok=True))


def _opened(path: Path) -> BinaryIO:
    return _writing(path, lambda: open(path, "wb"))


def _writing(path: str | os.PathLike, action: Callable):
    """Run a file-system action; an OSError (a full disk, no permission) becomes one line naming `path`."""
    try:
        return action()
    except OSError as e:
        reason = "no space left on the device" if e.errno == errno.ENOSPC else (e.strerror or str(e)).lower()
        raise MemnetError(f"{path}: cannot write ({reason})") from None


__all__ = ["ARCHIVE", "MIRRORS", "SETS", "RELEASE", "expected_files", "data_home", "release_dir",
           "resolve_data_dir", "data_dir_arg", "download", "fetch", "unpack", "check_file"]
