"""`memnet bench`: presets trained on every (task, seed set), one JSONL record per run, and the
table of errors per task over the seed sets, rebuilt from the records alone.

A job is (preset, task, seed set k): memnet.trainer.train on that one task with train.seed = 100 k,
so set k's restarts take seeds 100 k .. 100 k + restarts - 1 (the S = 0, 100, 200, ... of the
older docs are sets 0, 1, 2, ...). Each finished job appends one line to OUT/records.jsonl:

    {"preset": "default", "preset_hash": "3f2a...", "commit": "26abd13...", "dirty": false,
     "data": "en-valid", "task": 1, "set": 0, "seed": 0, "restarts": 10, "valid_error": 0.0,
     "test_error": 0.001, "failed": false, "mean_hops": 1.0, "hops_match_facts": 1.0,
     "hop_accuracy": [1.0, null, null], "test_questions": 1000, "seconds": 41.3}

With --joint a job is (preset, seed set k): one model trained on all the tasks together, as
`memnet train --task 1-20` trains (the joint preset), and a record per task from it, each with
"joint": [the tasks]; those records keep to a table of their own.

preset_hash is the sha256 of the preset's checked config (canonical JSON) less what a job sets
(data.dir, data.task, train.seed) and train.threads; OUT/presets/NAME-HASH.yaml holds that config.
A job whose record is there is not run again, so a stopped bench resumes where it stopped.

What trained a job is in its record too (memnet.train_on): "train_data": "official" (the --data
set's train and valid files), "generated" with the count, seed and generator hash of the
generated stories it trained on (tested on --data's test file all the same), or
"official+generated": the official train file and that many generated questions, chosen on the
official valid file. Records of another training source are other jobs, and tables keep them
apart. Every record also says how much of the test the training vocabulary never covered
(test_unseen_answer, test_unseen_word, unseen_words; memnet.train_on.unseen).
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import subprocess
import tempfile
import textwrap
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import yaml

from memnet import babi, config, train_on
from memnet.config import find_preset
from memnet.errors import MemnetError
from memnet.evaluation import is_failed

ROOT = Path(__file__).resolve().parents[1]
SEED_STEP = 100  # set k trains from train.seed = SEED_STEP * k
RECORDS = "records.jsonl"
JOB_KEYS = ("data.dir", "data.task", "train.seed")  # what each job sets (so --set may not)
# what every record holds, and its type (bool is an int to JSON: told apart below)
FIELDS = {"preset": str, "preset_hash": str, "task": int, "set": int, "valid_error": float, "test_error": float,
          "mean_hops": float, "hop_accuracy": list}
KINDS = {str: "a string", int: "a whole number", float: "a number", list: "a list"}


@dataclass(frozen=True)
class Preset:
    """A named setting: its checked config (data.dir, data.task and train.seed left to the jobs)."""

    name: str
    values: dict[str, Any]
    hash: str


def load_preset(text: str, overrides: dict[str, Any] | None = None) -> Preset:
    """--config: a YAML file's path (named by its stem) or a preset's name (memnet.config.find_preset),
    with dotted overrides on top. Each job trains with train.threads 1 unless the overrides say otherwise: jobs run
    side by side, and one thread per process keeps them from fighting over the cores."""
    path = find_preset(text)
    name = path.stem if Path(text).suffix in (".yaml", ".yml") or Path(text).is_file() else text
    taken = sorted(set(overrides or {}) & set(JOB_KEYS))
    if taken:
        raise MemnetError(f"--set {taken[0]}: each job sets it (use --data, --tasks and --sets)")
    cfg = config.load(path, {"train.threads": 1, **(overrides or {})})
    if cfg.train.restarts > SEED_STEP:
        raise MemnetError(f"{name}: train.restarts {cfg.train.restarts}: a seed set is {SEED_STEP} seeds wide, "
                          f"more restarts would share seeds with the next set")
    values = cfg.to_dict()
    for key in JOB_KEYS:
        section, leaf = key.split(".")
        values[section].pop(leaf)
    hashed = {s: {k: v for k, v in fields.items() if (s, k) != ("train", "threads")} for s, fields in values.items()}
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return Preset(name, values, digest)


def commit() -> tuple[str | None, bool | None]:
    """The checkout's HEAD and whether memnet/ or the presets differ from it; (None, None)
    where memnet is not a git checkout's (an installed copy, even inside another repository)."""
    try:
        top, head = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=ROOT, capture_output=True,
                                   text=True, check=True).stdout.splitlines()
        if Path(top).resolve() != ROOT:
            return None, None
        status = subprocess.run(["git", "status", "--porcelain", "--", "memnet", "config.yaml", "configs"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return head, bool(status.strip())


@dataclass(frozen=True)
class Job:
    preset: Preset
    tasks: tuple[int, ...]  # one task, or with --joint every task one model trains on
    set: int
    data: str  # the data folder, absolute
    training: train_on.TrainOn = train_on.TrainOn()  # the official files, or generated stories
    joint: bool = False
    runs: str | None = None  # a folder to keep each job's run folder in (model.pt ...), or None

    @property
    def folder(self) -> Path | None:
        """Where the job's run folder is kept: RUNS/PRESET[-SOURCE]/set-K[/qaT], or None."""
        if self.runs is None:
            return None
        t = self.training
        tag = f"-{t.kind.replace('+', '-and-')}-{t.questions}" if t.generated else ""
        folder = Path(self.runs) / f"{self.preset.name}{tag}{'-joint' * self.joint}" / f"set-{self.set}"
        return folder if self.joint else folder / f"qa{self.tasks[0]}"

    @property
    def keys(self) -> list[tuple[str, str, int, int, str]]:
        """The keys of the records the job writes: one per task."""
        source = self.training.label + JOINT * self.joint
        return [(self.preset.name, Path(self.data).name, t, self.set, source) for t in self.tasks]

    @property
    def name(self) -> str:
        what = f"joint qa{min(self.tasks)}-{max(self.tasks)}" if self.joint else f"qa{self.tasks[0]}"
        return f"{self.preset.name} {what} set {self.set}"


JOINT = " joint"  # what a joint run's records add to their source in a key


def source(record: dict[str, Any]) -> str:
    """What trained a record's model: train_on.label, and " joint" where one model learnt every task."""
    return train_on.label(record) + JOINT * bool(record.get("joint"))


def key(record: dict[str, Any]) -> tuple[str, str, int, int, str]:
    return record["preset"], record.get("data", ""), record["task"], record["set"], source(record)


def run_job(job: Job, code: tuple[str | None, bool | None]) -> list[dict[str, Any]]:
    """Train one job in this process: one model on its task, or with job.joint on all its tasks
    together; a record per task (without a test split: an error)."""
    from memnet.run import RunFolder
    from memnet.trainer import train  # torch loads in the process that trains

    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memnet-bench-") as tmp:  # generated stories live only for the run
        sources = {}
        for t in job.tasks:
            folder, sources[t] = train_on.folder(job.training, job.data, t, SEED_STEP * job.set, Path(tmp))
        values = config.merge(job.preset.values, {"data.dir": folder, "data.task": ",".join(map(str, job.tasks)),
                                                  "train.seed": SEED_STEP * job.set})
        cfg = config.from_dict(values)
        result = train(cfg, None if job.folder is None else RunFolder(job.folder, force=True), progress=False, log=False)
        if result["interrupted"]:
            raise KeyboardInterrupt
        missing = [t for t in job.tasks if str(t) not in result.get("test", {}).get("tasks", {})]
        if missing:
            raise MemnetError(f"{job.data}: expected a test file for task {missing[0]} "
                              f"({babi.task_filename(missing[0], 'test')}), found no such file")
        unseen = {t: train_on.unseen(result["vocab"], babi.samples(babi.load_split(folder, t, "test")))
                  for t in job.tasks}
    seconds = round(time.perf_counter() - began, 1)
    joint = {"joint": list(job.tasks)} if job.joint else {}
    records = []
    for t in job.tasks:
        test, valid = result["test"]["tasks"][str(t)], result["valid"]["tasks"][str(t)]
        records.append({
            "preset": job.preset.name, "preset_hash": job.preset.hash, "commit": code[0], "dirty": code[1],
            "data": Path(job.data).name, "task": t, "set": job.set, "seed": cfg.train.seed,
            "restarts": cfg.train.restarts, "valid_error": round(valid["error"], 6), "test_error": round(test["error"], 6),
            "failed": is_failed(test["error"]), "mean_hops": test["mean_hops"],
            "hops_match_facts": hops_match_facts(test), "hop_accuracy": test["hop_accuracy"],
            "test_questions": test["n"], **sources[t], **unseen[t], **joint, "seconds": seconds})
    return records


def hops_match_facts(summary: dict[str, Any]) -> float | None:
    """The share of a task's questions (memnet.evaluation.metrics' summary of it) answered after
    as many hops as they have supporting facts; None without questions."""
    match = sum(n for facts, hops in summary["hops_by_facts"].items() for h, n in hops.items() if h == facts)
    return match / summary["n"] if summary["n"] else None


def execute(jobs: list[Job], processes: int, code: tuple[str | None, bool | None]) -> Iterator[list[dict[str, Any]]]:
    """Each job's records as it finishes: here one after another, or in `processes` local processes."""
    if processes == 1:
        for job in jobs:
            yield run_job(job, code)
        return
    # spawn, not fork: a forked child inherits torch's and numba's thread pools mid-state
    pool = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"))
    try:
        for future in as_completed([pool.submit(run_job, job, code) for job in jobs]):
            yield future.result()
    finally:  # an error or Ctrl-C: the jobs not started yet never start
        pool.shutdown(wait=True, cancel_futures=True)


def run(presets: list[Preset], tasks: list[int], sets: Iterable[int], data: str | Path, out: str | Path,
        processes: int = 1, say: Callable[[str], None] = print,
        submitit: tuple[str, dict[str, Any]] | None = None,
        training: train_on.TrainOn = train_on.TrainOn(), joint: bool = False,
        runs: str | Path | None = None) -> list[dict[str, Any]]:
    """Train every (preset, task, set) not yet recorded in OUT/records.jsonl, appending each
    record as its job finishes; returns the records of these jobs, in that order of keys.
    submitit: (cluster, parameters) to run the jobs through submitit (memnet.cluster) instead
    of `processes` local processes; its files go to OUT/submitit. training: what trains each job
    (memnet.train_on; the test is --data's test file either way). joint: one model per (preset,
    set) trained on all the tasks together, as `memnet train --task 1-20` trains, instead of one
    per task; its records say so ("joint": the tasks) and keep to their own table. runs: a folder
    where each job's run folder stays (Job.folder: model.pt, config.yaml, metrics.jsonl), for
    `memnet eval`, `inspect` or a later step to read; else the runs live in temporary folders."""
    out, data = Path(out), str(Path(data).resolve())
    out.mkdir(parents=True, exist_ok=True)
    path = out / RECORDS
    done = {key(r): r for r in read_records(path, repair=say)} if path.exists() else {}
    groups = [tuple(tasks)] if joint else [(t,) for t in tasks]
    runs = None if runs is None else str(Path(runs).resolve())
    jobs = [Job(p, g, k, data, training, joint, runs) for p in presets for g in groups for k in sets]
    for t in tasks if training.generated else []:  # a missing file stops the bench before any job trains
        train_on.test_file(data, t)
        if training.official:
            train_on.official_files(data, t)
    for p in presets:
        older = {r["preset_hash"] for k, r in done.items() if k[0] == p.name}
        if older - {p.hash}:
            raise MemnetError(f"{path}: holds preset {p.name} with another config (hash {min(older)[:12]}, now "
                              f"{p.hash[:12]}): give another --out, or another name to the changed preset")
        saved = out / "presets" / f"{p.name}-{p.hash[:12]}.yaml"
        saved.parent.mkdir(exist_ok=True)
        saved.write_text(yaml.safe_dump(p.values, sort_keys=False), encoding="utf-8")
    todo = [j for j in jobs if any(k not in done for k in j.keys)]
    code = commit()
    if submitit is None:
        how, finished = f"{processes} at a time", execute(todo, processes, code)
    else:
        from memnet import cluster
        how = f"through submitit ({submitit[0]})"
        finished = cluster.records(todo, run_job, code, out / "submitit", *submitit) if todo else iter(())
    together = f", each one model on {len(tasks)} tasks together (joint)" if joint else ""
    say(f"{len(jobs)} jobs{together}{training.says}: {len(jobs) - len(todo)} recorded in {path}, {len(todo)} to run, {how}")
    for i, records in enumerate(finished, 1):
        for record in records:
            append(path, record)
            done[key(record)] = record
            say(f"[{i}/{len(todo)}] {record['preset']} qa{record['task']} set {record['set']}: test "
                f"error {100 * record['test_error']:.1f}%, valid {100 * record['valid_error']:.1f}%, "
                f"mean hops {record['mean_hops']:.2f}, {record['seconds']:.0f} s")
    return [done[k] for j in jobs for k in j.keys]


def append(path: Path, record: dict[str, Any]) -> None:
    """One whole line in one write, flushed to disk: a killed bench leaves at most a torn last
    line, which read_records names (or drops, when resuming)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_records(path: str | Path, repair: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The records of a records file, checked. A last line without its newline was torn by a
    killed bench: an error, or with `repair` cut off (its job runs again) and reported to it."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise MemnetError(f"{path}: cannot read records ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise MemnetError(f"{path}: not a records file (byte {e.object[e.start]:#04x} at offset {e.start} is not UTF-8)") from None
    *lines, tail = text.split("\n")  # tail: "" when the last line is whole
    if tail.strip():
        where = f"{path}:{len(lines) + 1}: a torn last line (no newline: a bench killed while writing it?)"
        if repair is None:
            raise MemnetError(f"{where}; delete it, or resume the bench, which drops it and runs its job again")
        with open(path, "r+b") as f:
            f.truncate(len(text.encode("utf-8")) - len(tail.encode("utf-8")))
        repair(f"{where}: dropped; its job runs again")
    return [check_record(line, f"{path}:{n}") for n, line in enumerate(lines, 1) if line.strip()]


def check_record(line: str, where: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as e:
        raise MemnetError(f"{where}: not a JSON record ({e})") from None
    if not isinstance(record, dict):
        raise MemnetError(f"{where}: not a bench record (expected a JSON object)")
    for name, typ in FIELDS.items():
        value = record.get(name)
        ok = isinstance(value, (int, float) if typ is float else typ) and not isinstance(value, bool)
        if not ok:
            raise MemnetError(f"{where}: not a bench record ({name}: expected {KINDS[typ]}, found {value!r})")
    return record


# ---------------------------------------------------------------------------- choosing on valid


def read_candidates(path: str | Path) -> dict[int | str, list[str]]:
    """A candidates file: YAML mapping each task (1-20) or `default` to a list of preset names."""
    try:
        values = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise MemnetError(f"{path}: cannot read candidates ({e.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise MemnetError(f"{path}: not a YAML file ({str(e).splitlines()[0]})") from None
    if not isinstance(values, dict) or not values:
        raise MemnetError(f"{path}: expected a mapping of tasks (1-20) or default to lists of preset names")
    candidates: dict[int | str, list[str]] = {}
    for task, names in values.items():
        if task != "default" and not (isinstance(task, int) and 1 <= task <= 20):
            raise MemnetError(f"{path}: {task!r}: expected a task 1-20 or default")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise MemnetError(f"{path}: {task}: expected a list of preset names, found {names!r}")
        candidates[task] = names
    return candidates


def candidate_names(candidates: dict[int | str, list[str]]) -> list[str]:
    """Every preset named in a candidates file, in the order of first mention."""
    return list(dict.fromkeys(n for names in candidates.values() for n in names))


def choose_on_valid(records: list[dict[str, Any]], candidates: dict[int | str, list[str]]) -> list[dict[str, Any]]:
    """Per task and set, the record of the task's candidate with the lowest valid error (the first
    listed of equals), with `chosen_from` naming it. Test error plays no part: only valid_error
    is read. A (task, set) some candidate has no record of is left out; so is a task the file
    gives no candidates (and no default)."""
    sources = sorted({source(r) for r in records})
    if len(sources) > 1:  # valid errors on different valid splits do not compare
        raise MemnetError(f"--choose-on-valid: the records were trained on {len(sources)} sources "
                          f"({', '.join(sources)}); choose among records of one")
    by = {(r["preset"], r["task"], r["set"]): r for r in records}
    hashes: dict[str, set[str]] = {}
    for r in records:
        hashes.setdefault(r["preset"], set()).add(r["preset_hash"])
    for name in candidate_names(candidates):
        if name not in hashes:
            raise MemnetError(f"unknown candidate {name!r}: no records of that preset "
                              f"(the records hold {', '.join(hashes) or 'none'})")
        if len(hashes[name]) > 1:
            raise MemnetError(f"candidate {name!r}: the records hold {len(hashes[name])} configs of that name")
    chosen = []
    for task, k in sorted({(r["task"], r["set"]) for r in records}):
        names = candidates.get(task, candidates.get("default"))
        if not names or any((n, task, k) not in by for n in names):
            continue
        best = min(names, key=lambda n: (by[n, task, k]["valid_error"], names.index(n)))
        chosen.append({**by[best, task, k], "chosen_from": best})
    return chosen


# ---------------------------------------------------------------------------- the table


@dataclass
class Row:
    """A task's figures (or the mean over tasks: task "mean"), each per seed set."""

    task: str
    test: dict[int, float]  # set -> test error
    valid: dict[int, float]  # set -> valid error
    failed: dict[int, int]  # set -> failed tasks (a task's row: 0 or 1)
    mean_hops: float  # mean over sets
    hops_match_facts: float | None  # share of test questions that took as many hops as they have facts
    hop_accuracy: list[float | None]  # per hop, mean over sets
    chosen: Counter = field(default_factory=Counter)  # with a choice on valid: the presets chosen, and how often
    unseen_answer: float | None = None  # share of test questions whose answer training never gave, mean over sets
    unseen_word: float | None = None  # share with a word training never contained in what they read
    unseen_words: list[str] = field(default_factory=list)  # test words training never contained, any set


def mean(values: Iterable[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def table(records: list[dict[str, Any]]) -> list[Row]:
    """One row per task, then the mean: over the seed sets that hold every task of the table
    (a set short of a task would flatter or hurt the mean), its mean and failed count per set."""
    tasks = sorted({r["task"] for r in records})
    rows = []
    for t in tasks:
        mine = {r["set"]: r for r in records if r["task"] == t}  # of a repeated (task, set): the last record
        hops = max(len(r["hop_accuracy"]) for r in mine.values())
        rows.append(Row(str(t), {k: r["test_error"] for k, r in mine.items()},
                        {k: r["valid_error"] for k, r in mine.items()},
                        {k: int(is_failed(r["test_error"])) for k, r in mine.items()},
                        mean(r["mean_hops"] for r in mine.values()),
                        mean(r.get("hops_match_facts") for r in mine.values()),
                        [mean(r["hop_accuracy"][h] for r in mine.values() if h < len(r["hop_accuracy"]))
                         for h in range(hops)],
                        Counter(r["chosen_from"] for r in mine.values() if "chosen_from" in r),
                        mean(r.get("test_unseen_answer") for r in mine.values()),
                        mean(r.get("test_unseen_word") for r in mine.values()),
                        sorted({w for r in mine.values() for w in r.get("unseen_words", [])})))
    complete = sorted(set.intersection(*(set(row.test) for row in rows))) if rows else []
    hops = max((len(row.hop_accuracy) for row in rows), default=0)
    rows.append(Row("mean", {k: mean(row.test[k] for row in rows) for k in complete},
                    {k: mean(row.valid[k] for row in rows) for k in complete},
                    {k: sum(row.failed[k] for row in rows) for k in complete},
                    mean(row.mean_hops for row in rows), mean(row.hops_match_facts for row in rows),
                    [mean(row.hop_accuracy[h] for row in rows if h < len(row.hop_accuracy)) for h in range(hops)],
                    sum((row.chosen for row in rows), Counter()),
                    mean(row.unseen_answer for row in rows), mean(row.unseen_word for row in rows)))
    return rows


def title(records: list[dict[str, Any]], candidates: int = 0) -> str:
    """What a table shows: its preset(s) (or a choice among how many), its seed sets and their seeds."""
    names = list(dict.fromkeys(f"{r.get('chosen_from', r['preset'])} ({r['preset_hash'][:12]})" for r in records))
    sets = sorted({r["set"] for r in records})
    seeds = ", ".join(str(SEED_STEP * k) for k in sets)
    what = (f"a per-task choice on valid among {candidates} candidates ({', '.join(names)})" if candidates
            else " and ".join(names))
    if any(r.get("joint") for r in records):
        what += f", one model per seed set for the {len({r['task'] for r in records})} tasks together (joint),"
    data = ", ".join(sorted({r.get("data", "?") for r in records}))
    over = (f"error (%) per task over {len(sets)} seed set{'s' * (len(sets) != 1)} (train.seed {seeds}), "
            f"mean and range (min-max) over the sets")
    generated = list(dict.fromkeys(train_on.label(r) for r in records if train_on.label(r) != "official"))
    if not generated:
        return f"{what} on {data}: {over}"
    official = all(g.startswith("official+") for g in generated)
    made = "; ".join(f"{n} generated questions per task, {'' if official else f'valid {max(1, int(n) // 10)} generated, '}"
                     f"generator {h}" for n, h in (g.split(":")[1:] for g in generated))
    if official:
        return (f"{what} trained on the official train file and generated stories, valid and test official ({data}): "
                f"{over}; trained on the official questions and {made} (seed = train.seed)")
    return (f"{what} trained on generated stories, tested on official test ({data}): {over}; trained on "
            f"{made} (seed = train.seed); the valid column is the generated valid split")


def cells(row: Row, choice: bool, unseen: bool = False) -> list[str]:
    """A row's columns: test and valid error (mean, range), failed, hops, hops = facts, hop accuracy,
    with `unseen` the shares of test questions that training's vocabulary did not cover."""
    def spread(values: dict[int, float]) -> list[str]:
        if not values:
            return ["-", "-"]
        return [f"{100 * mean(values.values()):.2f}", f"{100 * min(values.values()):.2f}-{100 * max(values.values()):.2f}"]

    failed = row.failed.values()
    if row.task == "mean":
        failed_text = f"{mean(failed):.1f} ({min(failed)}-{max(failed)})" if row.failed else "-"
    else:
        failed_text = f"{sum(failed)}/{len(row.failed)}"
    hop_acc = "/".join("-" if a is None else f"{100 * a:.0f}" for a in row.hop_accuracy)
    match = "-" if row.hops_match_facts is None else f"{100 * row.hops_match_facts:.1f}"
    out = [row.task, *spread(row.test), *spread(row.valid), failed_text, f"{row.mean_hops:.2f}", match, hop_acc]
    if unseen:
        out += ["-" if v is None else f"{100 * v:.1f}" for v in (row.unseen_answer, row.unseen_word)]
    if choice:
        out.append(", ".join(f"{n} {c}" for n, c in row.chosen.most_common()))
    return out


HEADER = ["task", "test", "range", "valid", "range", "failed", "hops", "hops=facts", "hop accuracy"]
NOTE = ("failed: a task's sets above 5% test error; in the mean row, failed tasks per set. hops: mean hops used "
        "on test; hops=facts: % of test questions answered after as many hops as they have supporting facts; "
        "hop accuracy: % per hop attending that step's supporting fact")
UNSEEN = ("unseen answer: % of test questions whose answer training never gave (no model trained on it can give "
          "it); unseen word: % whose question or supporting facts hold a word training never contained (read as "
          "<unk>); means over the sets")


def layout(rows: list[Row]) -> tuple[list[str], bool, bool, str]:
    """The header, whether there is a chosen column and unseen columns, and the note below."""
    choice, unseen = any(row.chosen for row in rows), any(row.unseen_answer is not None for row in rows)
    note = NOTE
    if unseen:
        words = "; ".join(f"qa{row.task}: {' '.join(row.unseen_words)}" for row in rows if row.unseen_words)
        note += f". {UNSEEN}. Test words training never contained: {words or 'none'}"
    head = HEADER + (["unseen answer", "unseen word"] if unseen else []) + (["chosen"] if choice else [])
    return head, choice, unseen, note


def text(title_line: str, rows: list[Row]) -> str:
    """The table in aligned columns for a terminal."""
    head, choice, unseen, note = layout(rows)
    body = [head] + [cells(row, choice, unseen) for row in rows]
    widths = [max(len(line[i]) for line in body) for i in range(len(head))]
    figures = len(head) - choice  # the chosen column's names read left-aligned
    lines = ["  ".join(c.rjust(w) if i < figures else c for i, (c, w) in enumerate(zip(line, widths))).rstrip()
             for line in body]
    return "\n".join([title_line, *lines, *textwrap.wrap(note, 100)])


def markdown(title_line: str, rows: list[Row]) -> str:
    """The table in markdown, for docs: the title in bold above it, the note below."""
    head, choice, unseen, note = layout(rows)
    lines = [f"**{title_line}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        c = cells(row, choice, unseen)
        if row.task == "mean":
            c = [f"**{x}**" if x else x for x in c]
        lines.append("| " + " | ".join(c) + " |")
    return "\n".join([*lines, "", note])


def columns(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The records per (preset, config, training source), in order of first appearance: one table
    each, so official and generated training (or two generators) never share a mean."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["preset"], r["preset_hash"], source(r)), []).append(r)
    for (name, _, _), group in groups.items():
        data = {r.get("data") for r in group}
        if len(data) > 1:
            raise MemnetError(f"the records of preset {name} come from {len(data)} data sets: "
                              f"{', '.join(sorted(map(str, data)))}; keep one per records file")
    return list(groups.values())
