"""`memnet data download`: the real download code against archives served on 127.0.0.1.

The archives are built here in the release's layout (tasks_1-20_v1-2/<set>/<file>, all 360
files) from small made-up stories, each citing as many supporting facts as its task's questions
do; `manifest` holds their hashes in place of the official ones (for en/ and en-valid/, as
memnet/official_manifest.py does). Nothing touches the internet.
"""
import errno
import functools
import hashlib
import io
import re
import shutil
import socket
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tqdm import tqdm

from memnet import official
from memnet.cli import main
from memnet.official_manifest import SHA256

RELEASE = official.RELEASE


def story(rel: str, i: int) -> str:
    """A story of its own per file, so that no two files share a hash: as many facts as the
    file's task cites per question, then one question citing them all."""
    n = official.SUPPORTING.get(task_of(rel), 2)
    facts = "".join(f"{k} Mary went to the room{i}.\n" for k in range(1, n + 1))
    return facts + f"{n + 1} Where is Mary? \troom{i}\t{' '.join(map(str, range(1, n + 1)))}\n"


def task_of(rel: str) -> int:
    """en-10k/qa3_three-supporting-facts_train.txt -> 3."""
    return int(re.match(r"qa(\d+)_", rel.rsplit("/", 1)[-1]).group(1))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The release unpacked: SOURCE/tasks_1-20_v1-2/{en,en-10k,...}/..., README.txt, LICENSE.txt."""
    root = tmp_path_factory.mktemp("release")
    for i, rel in enumerate(official.expected_files()):
        path = root / RELEASE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(story(rel, i))
    (root / RELEASE / "README.txt").write_text("the release's description\n")
    (root / RELEASE / "LICENSE.txt").write_text("CC BY 3.0\n")
    return root


@pytest.fixture(scope="module")
def manifest(source) -> dict[str, str]:
    return {rel: hashlib.sha256((source / RELEASE / rel).read_bytes()).hexdigest()
            for rel in official.expected_files() if rel.split("/")[0] in ("en", "en-valid")}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch, manifest) -> Path:
    """Downloads go to HOME (through $MEMNET_DATA) and are held to the test release's hashes."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEMNET_DATA", str(home))
    monkeypatch.setattr(official, "SHA256", manifest)
    for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    return home


def pack(source: Path, path: Path, mode: str = "w:gz", skip: str | None = None,
         replace: dict[str, bytes] | None = None, extra: dict[str, bytes] | None = None,
         reverse: bool = False, prefix: str = "") -> Path:
    """Pack the release from `source` into `path`: leaving out `skip`, with other bytes for the
    files in `replace`, members added from `extra` (name -> bytes), in reverse order or with a
    prefix (./) on every name."""
    files = sorted((p for p in (source / RELEASE).rglob("*") if p.is_file()), reverse=reverse)
    with tarfile.open(path, mode) as tar:
        for folder in ("", *official.SETS):  # the folders come as members of their own, as in the release
            info = tarfile.TarInfo(f"{prefix}{RELEASE}/{folder}".rstrip("/"))
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for p in files:
            rel = p.relative_to(source / RELEASE).as_posix()
            if rel == skip:
                continue
            data = (replace or {}).get(rel, p.read_bytes())
            add(tar, f"{prefix}{RELEASE}/{rel}", data)
        for name, data in (extra or {}).items():
            add(tar, name, data)
    return path


def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture
def served(tmp_path):
    """A web server on 127.0.0.1 serving tmp_path/www; yields (folder, base URL, requested paths)."""
    folder = tmp_path / "www"
    folder.mkdir()
    requested = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requested.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}", requested
    server.shutdown()
    server.server_close()


@pytest.fixture
def refused() -> str:
    """A URL on a port nobody listens on: the connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/{official.ARCHIVE}"


def download(*args: str) -> int:
    return main(["data", "download", *args])


def leftovers(home: Path) -> list[str]:
    """What a download left in HOME besides a finished release folder."""
    return sorted(p.name for p in home.iterdir() if p.name != RELEASE) if home.exists() else []


def same_as(source: Path, target: Path) -> bool:
    names = sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())
    return names == sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) and \
        all((source / n).read_bytes() == (target / n).read_bytes() for n in names)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_the_release_has_360_files_in_eight_sets():
    files = official.expected_files()
    assert len(files) == len(set(files)) == 6 * 40 + 2 * 60
    assert {f.split("/")[0] for f in files} == set(official.SETS)
    assert "hn-10k/qa20_agents-motivations_test.txt" in files and "en-valid-10k/qa7_valid.txt" in files
    assert "en-valid/qa1_single-supporting-fact_train.txt" not in files


def test_the_shipped_manifest_covers_en_and_en_valid():
    assert sorted(SHA256) == sorted(f for f in official.expected_files() if f.split("/")[0] in ("en", "en-valid"))
    # each as hexdigest() writes it, which the download compares it to: 64 lowercase hex digits (int(h, 16)
    # also takes upper case, spaces and underscores)
    assert [rel for rel, h in SHA256.items() if not re.fullmatch("[0-9a-f]{64}", h)] == []


def test_download_unpacks_every_file_checked(source, served, home, capsys):
    folder, url, requested = served
    pack(source, folder / official.ARCHIVE)
    assert download("--url", f"{url}/{official.ARCHIVE}") == 0
    out = capsys.readouterr().out
    assert f"downloaded {url}/{official.ARCHIVE}" in out
    assert f"wrote {home / RELEASE}" in out and "360 files: 100 checked by SHA-256, 260 read as bAbI stories" in out
    assert same_as(source / RELEASE, home / RELEASE)
    assert leftovers(home) == []  # no archive, no temporary folder
    assert requested == [f"/{official.ARCHIVE}"]


def test_progress_bar_counts_the_bytes(source, served, home, capsys):
    folder, url, _ = served
    size = pack(source, folder / official.ARCHIVE).stat().st_size
    official.download(urls=[f"{url}/{official.ARCHIVE}"], progress=True)
    err = capsys.readouterr().err
    shown = tqdm.format_sizeof(size)  # "7.68k"
    assert f"{official.ARCHIVE}: 100%" in err and f" {shown}/{shown} " in err


@pytest.mark.parametrize("bad", ["missing", "refused", "not an archive", "truncated", "an empty stand-in"])
def test_falls_back_to_the_next_mirror(bad, source, served, refused, home, capsys):
    folder, url, requested = served
    good = pack(source, folder / official.ARCHIVE)
    (folder / "page.html").write_text("<html>a login page</html>")
    (folder / "half.tar.gz").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    if bad == "an empty stand-in":
        pack(source, folder / "stand-in.tar.gz", replace={"en-10k/qa3_three-supporting-facts_train.txt": b""})
    first = {"missing": f"{url}/nothing-here.tar.gz", "refused": refused, "not an archive": f"{url}/page.html",
             "truncated": f"{url}/half.tar.gz", "an empty stand-in": f"{url}/stand-in.tar.gz"}[bad]
    assert download("--url", first, "--url", f"{url}/{official.ARCHIVE}") == 0
    assert f"downloaded {url}/{official.ARCHIVE}" in capsys.readouterr().out
    assert same_as(source / RELEASE, home / RELEASE)
    assert leftovers(home) == []


def test_no_good_mirror_is_one_line_naming_each(source, served, refused, home, capsys):
    folder, url, _ = served
    (folder / "page.html").write_text("<html>a login page</html>")
    assert download("--url", f"{url}/nothing-here.tar.gz", "--url", refused, "--url", f"{url}/page.html") == 2
    err = one_line_error(capsys)
    assert err.startswith(f"memnet data: error: could not download {official.ARCHIVE} from any mirror")
    assert f"{url}/nothing-here.tar.gz: HTTP 404" in err
    assert f"{refused}: connection refused" in err
    assert (f"{url}/page.html: expected a tar archive (gzip, bzip2, xz or plain), found a file that is not one "
            "(it begins b'<html>a login page</html>')") in err
    assert "--from FILE" in err
    for failed in (f"{url}/nothing-here.tar.gz", refused, f"{url}/page.html"):  # each named once, not twice
        assert err.count(failed) == 1, err
    assert leftovers(home) == [] and not (home / RELEASE).exists()


def test_truncated_archive_is_refused_leaving_nothing(source, tmp_path, home, capsys):
    good = pack(source, tmp_path / "good.tar.gz").read_bytes()
    for cut in (len(good) // 2, 100, len(good) - 4):  # the last: only the end of the gzip check sum
        (tmp_path / "cut.tar.gz").write_bytes(good[:cut])
        assert download("--from", str(tmp_path / "cut.tar.gz")) == 2
        err = one_line_error(capsys)
        assert f"{tmp_path / 'cut.tar.gz'}: expected a complete tar archive, found a broken one" in err, err
        assert leftovers(home) == [] and not (home / RELEASE).exists()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    (tmp_path / "flipped.tar.gz").write_bytes(bytes(flipped))
    assert download("--from", str(tmp_path / "flipped.tar.gz")) == 2
    assert f"{tmp_path / 'flipped.tar.gz'}: expected " in one_line_error(capsys)
    assert leftovers(home) == [] and not (home / RELEASE).exists()


def test_altered_or_missing_file_is_refused(source, tmp_path, home, capsys):
    rel = "en-valid/qa16_test.txt"
    altered = (source / RELEASE / rel).read_bytes().replace(b"Mary", b"Mark")
    assert download("--from", str(pack(source, tmp_path / "a.tar.gz", replace={rel: altered}))) == 2
    assert f"{RELEASE}/{rel} differs from the official file (SHA-256 " in one_line_error(capsys)
    assert leftovers(home) == [] and not (home / RELEASE).exists()

    rel = "hn-10k/qa3_three-supporting-facts_train.txt"  # a set without known hashes
    assert download("--from", str(pack(source, tmp_path / "m.tar.gz", skip=rel))) == 2
    assert f"found 1 of its 360 files missing (first: {RELEASE}/{rel})" in one_line_error(capsys)
    assert leftovers(home) == [] and not (home / RELEASE).exists()


def other_task(rel: str) -> str:
    """The file of the same set and split of a task whose questions cite another number of facts."""
    task = 3 if official.SUPPORTING.get(task_of(rel)) != 3 else 1
    folder, split = rel.split("/")[0], rel.rsplit("_", 1)[1]
    return next(f for f in official.expected_files()
                if f.startswith(f"{folder}/") and task_of(f) == task and f.endswith(f"_{split}"))


def test_every_file_emptied_or_altered_is_refused_by_name(source, manifest):
    # Each of the 360 files in turn, in memory, through the check the unpacking runs on every member:
    # the test release passes; emptied, cut inside its question, not UTF-8, or holding another task's
    # stories, it is refused with a line that names it. The hashed files of en/ and en-valid/ by their
    # hash; every other file by what the strict reader finds.
    files = {rel: (source / RELEASE / rel).read_bytes() for rel in official.expected_files()}
    for rel, good in files.items():
        assert official.check_file(rel, good, manifest) is None, rel
        altered = {"emptied": b"", "blank": b"\n\n", "cut": good[:good.rindex(b"\t")],
                   "not UTF-8": good.replace(b"Mary", b"M\xe4ry", 1)}
        if official.SUPPORTING.get(task_of(rel)):  # counting and lists cite any number of facts
            altered["another task's stories"] = files[other_task(rel)]
        for how, data in altered.items():
            problem = official.check_file(rel, data, manifest)
            assert problem is not None and problem.startswith(f"{RELEASE}/{rel}"), (rel, how, problem)
            assert "\n" not in problem
            if rel not in manifest:
                assert (how in ("emptied", "blank")) == ("found an empty file" in problem or "blank space" in problem)
                assert (how == "cut") == ("found 2 field(s)" in problem), problem
                assert (how == "not UTF-8") == ("expected UTF-8 text" in problem), problem
                assert (how == "another task's stories") == (f"expected task {task_of(rel)} (" in problem), problem


def test_an_archive_of_bad_files_names_the_first_and_counts_them_all(source, tmp_path, home, capsys):
    archive = pack(source, tmp_path / "empty.tar", mode="w", replace=dict.fromkeys(official.expected_files(), b""))
    assert download("--from", str(archive)) == 2
    err = one_line_error(capsys)  # every member was checked, not only the first bad one
    assert f"{archive}: {RELEASE}/{official.expected_files()[0]} differs from the official file" in err
    assert err.endswith("(and 359 more bad files)\n"), err
    assert leftovers(home) == [] and not (home / RELEASE).exists()


@pytest.mark.parametrize("rel, bad, message", [
    ("en-10k/qa3_three-supporting-facts_train.txt", lambda files: b"",
     "en-10k/qa3_three-supporting-facts_train.txt: expected bAbI stories, found an empty file"),
    ("hn/qa3_three-supporting-facts_train.txt", lambda files: files["hn/qa1_single-supporting-fact_train.txt"],
     "hn/qa3_three-supporting-facts_train.txt: expected task 3 (three-supporting-facts), whose questions cite "
     "3 supporting facts each, found questions citing mostly 1"),
    ("shuffled/qa5_three-arg-relations_test.txt", lambda files: files["shuffled/qa5_three-arg-relations_train.txt"],
     "shuffled/qa5_three-arg-relations_test.txt: expected stories of its own, found the same bytes as "
     f"{RELEASE}/shuffled/qa5_three-arg-relations_train.txt"),
    ("en-valid-10k/qa2_valid.txt", lambda files: files["en-valid-10k/qa2_valid.txt"].replace(b"\t", b" "),
     "en-valid-10k/qa2_valid.txt:3: a question line's fields are separated by tabs; found spaces"),
    ("hn-10k/qa20_agents-motivations_test.txt", lambda files: b"\x1f\x8b\x08\x00 compressed bytes",
     "hn-10k/qa20_agents-motivations_test.txt:1: expected UTF-8 text, found byte 0x8b"),
], ids=["empty stand-in", "another task", "a copy of the train split", "spaces for tabs", "not text"])
def test_a_bad_file_is_refused_naming_it_and_what_is_wrong(rel, bad, message, source, tmp_path, home, capsys):
    files = {f: (source / RELEASE / f).read_bytes() for f in official.expected_files()}
    archive = pack(source, tmp_path / "bad.tar.gz", replace={rel: bad(files)})
    assert download("--from", str(archive)) == 2
    err = one_line_error(capsys)
    assert err.startswith(f"memnet data: error: {archive}: {RELEASE}/{message}"), err
    assert leftovers(home) == [] and not (home / RELEASE).exists()


def test_a_member_larger_than_any_file_of_the_release_is_refused_unread(source, tmp_path, home, capsys, monkeypatch):
    monkeypatch.setattr(official, "MAX_FILE", 1 << 20)
    rel = "hn-10k/qa1_single-supporting-fact_train.txt"
    archive = pack(source, tmp_path / "big.tar.gz", replace={rel: b"1 Mary is here.\n" * 70_000})
    assert download("--from", str(archive)) == 2
    assert f"member {RELEASE}/{rel} holds 1120000 bytes, expected a file of the release (each under 1 MB)" in \
        one_line_error(capsys)
    assert leftovers(home) == [] and not (home / RELEASE).exists()


def test_file_names_carry_the_tasks_of_the_manifest():
    # the task number in each expected file's name is one of the manifest's tasks, with its name
    slugs = {task_of(f): f.split("/")[1].split("_")[1] for f in SHA256 if f.startswith("en/")}
    assert slugs == official.TASK_NAMES
    for rel in official.expected_files():
        assert task_of(rel) in slugs
        assert rel.split("/")[0].startswith("en-valid") or f"qa{task_of(rel)}_{slugs[task_of(rel)]}_" in rel
    assert sorted([*official.SUPPORTING, 7, 8]) == sorted(slugs)


def test_a_repack_of_the_same_files_passes(source, tmp_path, home, capsys):
    # another compression, another order, "./" before every name, and a stray file of a Mac's
    repack = pack(source, tmp_path / "repack.tar.bz2", mode="w:bz2", reverse=True, prefix="./",
                  extra={f"./{RELEASE}/en/._qa1_single-supporting-fact_train.txt": b"\0\5\26\7"})
    assert download("--from", str(repack)) == 0
    assert "1 other file(s) in the archive skipped" in capsys.readouterr().out
    assert same_as(source / RELEASE, home / RELEASE)


def test_a_plain_tar_passes_and_its_broken_copy_is_named_broken(source, tmp_path, home, capsys):
    plain = pack(source, tmp_path / "plain.tar", mode="w")
    cut = tmp_path / "cut.tar"
    cut.write_bytes(plain.read_bytes()[:len(plain.read_bytes()) // 2 + 100])  # ends inside a file
    assert download("--from", str(cut)) == 2
    assert f"{cut}: expected a complete tar archive, found a broken one" in one_line_error(capsys)
    assert leftovers(home) == [] and not (home / RELEASE).exists()
    assert download("--from", str(plain)) == 0
    assert same_as(source / RELEASE, home / RELEASE)


@pytest.mark.parametrize("name", ["../evil.txt", f"{RELEASE}/../../evil.txt", "/tmp/memnet-evil.txt"])
def test_a_member_outside_the_folder_is_refused(name, source, tmp_path, home, capsys):
    archive = pack(source, tmp_path / "evil.tar.gz", extra={name: b"gotcha\n"})
    assert download("--from", str(archive)) == 2
    assert f"member {name!r} points outside the archive's folder" in one_line_error(capsys)
    assert leftovers(home) == [] and not (home / RELEASE).exists()
    assert not list(tmp_path.rglob("evil.txt")) and not Path("/tmp/memnet-evil.txt").exists()


def test_a_link_in_place_of_a_file_is_refused(source, tmp_path, home, capsys):
    rel = "en/qa1_single-supporting-fact_train.txt"
    archive = tmp_path / "link.tar.gz"
    pack(source, archive, skip=rel)
    with tarfile.open(archive, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    with tarfile.open(archive, "w:gz") as tar:
        for m, data in members:
            tar.addfile(m, None if data is None else io.BytesIO(data))
        link = tarfile.TarInfo(f"{RELEASE}/{rel}")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    assert download("--from", str(archive)) == 2
    assert f"member {RELEASE}/{rel} is a link or a folder, expected a file" in one_line_error(capsys)
    assert leftovers(home) == [] and not (home / RELEASE).exists()


def test_from_file_needs_no_network(source, tmp_path, home, capsys, monkeypatch):
    monkeypatch.setattr(official, "MIRRORS", ("http://127.0.0.1:9/never",))
    monkeypatch.setattr(official.urllib.request, "urlopen", lambda *a, **k: pytest.fail("went to the network"))
    assert download("--from", str(pack(source, tmp_path / "mine.tar.gz"))) == 0
    assert same_as(source / RELEASE, home / RELEASE)
    assert download("--from", str(tmp_path / "none.tar.gz"), "--force") == 2
    assert f"{tmp_path / 'none.tar.gz'}: expected the archive {official.ARCHIVE}, found no such file" in one_line_error(capsys)
    assert download("--from", str(tmp_path / "mine.tar.gz"), "--url", "http://127.0.0.1:9/x") == 2
    assert "--from FILE and --url URL exclude each other" in one_line_error(capsys)
    assert same_as(source / RELEASE, home / RELEASE)  # the failed --force kept the copy


def test_an_existing_copy_stays_without_force(source, served, home, capsys):
    folder, url, requested = served
    pack(source, folder / official.ARCHIVE)
    assert download("--url", f"{url}/{official.ARCHIVE}") == 0
    mine = home / RELEASE / "en" / "notes.txt"
    mine.write_text("mine\n")
    capsys.readouterr()
    assert download("--url", f"{url}/{official.ARCHIVE}") == 0
    out = capsys.readouterr().out
    assert f"{home / RELEASE}: already downloaded" in out and "--force downloads it again" in out
    assert mine.exists() and len(requested) == 1  # not fetched again
    archive = pack(source, home.parent / "mine.tar.gz")
    assert download("--from", str(archive)) == 0  # the way out names what the user did: --from
    out = capsys.readouterr().out
    assert out.endswith(f"already downloaded ({', '.join(official.SETS)}); --from {archive} --force replaces it\n")
    assert mine.exists()
    assert download("--url", f"{url}/{official.ARCHIVE}", "--force") == 0
    assert not mine.exists() and len(requested) == 2 and same_as(source / RELEASE, home / RELEASE)
    assert leftovers(home) == []

    (home / RELEASE / "hn" / "qa5_three-arg-relations_test.txt").unlink()  # a damaged copy
    assert download("--url", f"{url}/{official.ARCHIVE}") == 2
    err = one_line_error(capsys)
    assert "found 1 of 360 files missing or empty (first: hn/qa5_three-arg-relations_test.txt); --force replaces it" in err
    assert download("--url", f"{url}/{official.ARCHIVE}", "--force") == 0
    (home / RELEASE / "en-10k" / "qa3_three-supporting-facts_train.txt").write_bytes(b"")  # an old memnet's stand-in
    assert download("--url", f"{url}/{official.ARCHIVE}") == 2
    assert "1 of 360 files missing or empty (first: en-10k/qa3_three-supporting-facts_train.txt)" in one_line_error(capsys)


def test_force_with_a_bad_archive_keeps_the_old_copy(source, tmp_path, home, capsys):
    assert download("--from", str(pack(source, tmp_path / "good.tar.gz"))) == 0
    (tmp_path / "bad.tar.gz").write_bytes(b"not an archive")
    assert download("--from", str(tmp_path / "bad.tar.gz"), "--force") == 2
    one_line_error(capsys)
    assert same_as(source / RELEASE, home / RELEASE) and leftovers(home) == []


def test_an_interrupt_leaves_nothing(source, tmp_path, home, monkeypatch):
    real, calls = official._write, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 50:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(official, "_write", interrupted)
    assert download("--from", str(pack(source, tmp_path / "good.tar.gz"))) == 130
    assert len(calls) == 50 and leftovers(home) == [] and not (home / RELEASE).exists()


def test_a_full_disk_is_one_line_and_leaves_nothing(source, tmp_path, home, monkeypatch, capsys):
    archive = pack(source, tmp_path / "good.tar.gz")
    real_open = open

    class Full(io.FileIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def fake_open(path, mode="r", *args, **kwargs):
        return Full(path, "wb") if "w" in mode and str(home) in str(path) else real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", fake_open)
    assert download("--from", str(archive)) == 2
    err = one_line_error(capsys)
    assert "cannot write (no space left on the device)" in err and str(home) in err
    assert leftovers(home) == [] and not (home / RELEASE).exists()


def test_set_names_stand_for_the_downloaded_copy(source, tmp_path, home, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["show", "en-valid", "--task", "1"]) == 2
    err = one_line_error(capsys)
    assert f"en-valid: no such folder here, and the official set en-valid is not downloaded to {home / RELEASE}: " \
           "`memnet data download` fetches it" in err
    assert main(["train", "--data", "hn-10k", "--out", "run"]) == 2 and "memnet data download" in one_line_error(capsys)

    assert download("--from", str(pack(source, tmp_path / "good.tar.gz"))) == 0
    capsys.readouterr()
    assert official.resolve_data_dir("en-valid") == str(home / RELEASE / "en-valid")
    assert official.resolve_data_dir("hn-10k") == str(home / RELEASE / "hn-10k")
    (tmp_path / "somewhere" / "else").mkdir(parents=True)
    assert official.resolve_data_dir("somewhere/else") == "somewhere/else"  # a folder here: as given
    assert main(["show", "en-valid", "--task", "1", "--split", "valid", "-n", "1"]) == 0
    assert "qa1_valid.txt: story 1 of 1" in capsys.readouterr().out
    shutil.copytree(source / RELEASE / "en", tmp_path / "en")  # a folder of that name here wins
    (tmp_path / "en" / "qa2_two-supporting-facts_train.txt").write_text("1 Here is here.\n2 Where? \there\t1\n")
    assert official.resolve_data_dir("en") == "en"
    assert main(["show", "en", "--task", "2"]) == 0 and "Here is here." in capsys.readouterr().out


SET_NAMES = "(en, en-10k, hn, hn-10k, shuffled, shuffled-10k, en-valid, en-valid-10k)"


@pytest.mark.parametrize("argv, given, nearest", [
    (["train", "--data", "en-vaild", "--task", "1", "--out", "run"], "en-vaild", "en-valid"),
    (["train", "--data", "../shared/babi/en-valid", "--task", "1", "--out", "run"], "../shared/babi/en-valid", "en-valid"),
    (["eval", "--checkpoint", "run", "--data", "hn10k"], "hn10k", "hn-10k"),
    (["show", "EN", "--task", "1"], "EN", "en"),
    (["check", "nowhere"], "nowhere", None),
    (["stats", "en-valid-10k", "--compare", "shuffle"], "shuffle", "shuffled"),
])
def test_a_missing_folder_or_unknown_set_names_the_sets_the_nearest_and_the_download(tmp_path, home, capsys,
                                                                                       monkeypatch, argv, given, nearest):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "en-valid-10k").mkdir()  # a folder of that name here: used as given
    assert main(argv) == 2
    err = one_line_error(capsys)
    assert f"error: {given}: no such data folder, nor an official set's name {SET_NAMES}; " in err
    assert (f"did you mean {nearest}? " in err) == (nearest is not None) and err.count("did you mean") <= 1
    assert err.endswith("`memnet data download` fetches the official sets, then --data takes their names\n")
    assert list(tmp_path.iterdir()) == [tmp_path / "en-valid-10k"]  # nothing written


def test_official_dir_finds_the_download(source, tmp_path, home, monkeypatch):
    monkeypatch.delenv("MEMNET_BABI_DIR", raising=False)
    checkout = tmp_path / "clone" / "memnet"  # no ../shared beside it
    assert official.official_dir(checkout) == tmp_path / "clone" / "shared" / "babi"
    assert download("--from", str(pack(source, tmp_path / "good.tar.gz"))) == 0
    assert official.official_dir(checkout) == home / RELEASE
    (tmp_path / "clone" / "shared" / "babi").mkdir(parents=True)
    assert official.official_dir(checkout) == tmp_path / "clone" / "shared" / "babi"
    monkeypatch.setenv("MEMNET_BABI_DIR", "/nonexistent")
    assert official.official_dir(checkout) == Path("/nonexistent")


def test_the_official_files_pass_the_shipped_manifest(babi_dir, source, tmp_path, home, monkeypatch):
    # the release as it will come: en/ and en-valid/ the official files, the other sets stand-ins
    monkeypatch.setattr(official, "SHA256", SHA256)
    mixed = tmp_path / "mixed"
    shutil.copytree(source / RELEASE, mixed / RELEASE)
    for name in ("en", "en-valid"):
        shutil.rmtree(mixed / RELEASE / name)
        shutil.copytree(babi_dir / name, mixed / RELEASE / name)
    assert official.download(archive=pack(mixed, tmp_path / "real.tar.gz"), progress=False) == home / RELEASE
    assert (home / RELEASE / "en-valid" / "qa16_valid.txt").read_bytes() == (babi_dir / "en-valid" / "qa16_valid.txt").read_bytes()


def test_the_official_files_pass_the_content_check(babi_dir):
    # what the other sets are held to, held to the files we know: each official file of en/ and
    # en-valid/ passes as if its hash were unknown, and every one of its questions cites as many
    # supporting facts as SUPPORTING says (not only most of them)
    from memnet.babi import parse_bytes

    for rel in official.expected_files():
        if rel.split("/")[0] in ("en", "en-valid"):
            data = (babi_dir / rel).read_bytes()
            assert official.check_file(rel, data, manifest={}) is None, rel
            cited = {len(q.support) for story in parse_bytes(data) for q in story.questions}
            assert cited == {official.SUPPORTING[task_of(rel)]} if task_of(rel) in official.SUPPORTING else cited, rel
