"""Two readers mixed by a gate over the question's words (mix.py), as a column of `memnet bench`.

Each reader is a preset `memnet bench --joint --runs RUNS` trained on the same tasks and seed
sets (say the joint memory network and the joint word reader); its run folders are
RUNS/PRESET-joint/set-K (trained per task, without --joint: RUNS/PRESET/set-K/qaT, mixed
task by task). For each seed set (and task) both hold, the gate is fitted on the valid split (as
mix.py fits it) and the mixture scored on test, and one record per task, in the bench's format,
is appended to OUT/records.jsonl, so that `memnet bench --table OUT/records.jsonl` prints its
table. A set (or task) already recorded there is not mixed again; --first-set K --sets N mixes
only the seed sets K .. K + N - 1 of those both hold.

    MEMNET_PLUGINS=experiments.readers PYTHONPATH=. memnet bench --config joint \\
        --config experiments/configs/joint-words.yaml --joint --sets 3 --first-set 20 --runs RUNS --out BENCH
    .venv/bin/python -m experiments.readers.mix_readers RUNS/joint-joint RUNS/joint-words-joint --out OUT

(from the repository root, which puts experiments/ on the path). A or B may also be one run
folder each (memnet train --out). A record's valid_error is the fitted gate's on the questions
it was fitted on; crossfit_valid_error, that of gates fitted on the other half of each task's
valid questions. Its preset_hash is that of the two readers' preset hashes and the gate's fit;
its hops and hop accuracy are reader A's (the memory network's when it is A).

A cascade (--then RUNS_C --then-config PRESET_C), of runs trained per task: where the mixture of A
and B is above --above (5%) on the task's valid split, cross-fitted, it is mixed again with a
third reader, (A ⊕ B) ⊕ C, the second gate fitted on the same valid questions; reader C is
trained only on those tasks (a reader too dear to train on every task, such as the pair reader,
whose cost grows with the square of the memories it keeps; it may keep fewer than A and reads
the most recent). A task waiting for C's run is not recorded; the command to train it is
printed. Its record's `cascade` holds the threshold, the mixture of A and B's cross-fitted
valid error and, where C was mixed in, the test errors of A ⊕ B and of C alone. A second
--then RUNS_D --then-config PRESET_D adds a fourth reader the same way, ((A ⊕ B) ⊕ C) ⊕ D, on
the tasks where the cascade before it is still above --above, cross-fitted with every gate
inside it refitted on each half (the `cascade` keys then add crossfit_valid_error_abc,
test_error_abc and test_error_d); and so on, a letter a reader. Runs trained on
the tasks together (--joint) make one model, which answers every task: it is mixed with reader
C's joint run of the same seed set on every task, no threshold read (a record's `cascade` then
holds no threshold).
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from experiments.readers import mix as mixture
from memnet import babi, bench
from memnet.cli import integer
from memnet.data import encode_tasks, read_splits, task_number
from memnet.errors import MemnetError
from memnet.evaluation import is_failed, metrics

SPLITS = ("valid", "test")
LATER = "cdefgh"  # the letters of a cascade's later readers, in turn (--then)
# how mix.Gate.fit fits (its keyword defaults): part of what a record's preset_hash names
GATE = {k: p.default for k, p in inspect.signature(mixture.Gate.fit).parameters.items() if p.kind is p.KEYWORD_ONLY}


def run_folders(path: Path) -> dict[tuple[int, int | None], Path]:
    """{(seed set, task or None): run folder}: PATH itself when it is a run folder, else the
    bench's runs of one preset under it, set-K (a joint run: task None) or set-K/qaT (one per task)."""
    if (path / "model.pt").is_file():
        if not finished(path):
            raise MemnetError(f"{path}: its training has not ended (metrics.jsonl holds no test metrics)")
        return {(seed_set(path), None): path}
    found = {}
    for model in sorted(path.glob("set-*/model.pt")) + sorted(path.glob("set-*/qa*/model.pt")):
        run = model.parent
        if not finished(run):  # still training (its model.pt is the best so far): not mixed yet
            continue
        task = int(run.name[2:]) if run.name.startswith("qa") and run.name[2:].isdigit() else None
        top = run.parent if task is not None else run
        if top.name[4:].isdigit():
            found[int(top.name[4:]), task] = run
    if not found:
        raise MemnetError(f"{path}: expected a run folder (model.pt) or a bench's runs of one preset "
                          f"(set-K/model.pt or set-K/qaT/model.pt, memnet bench --runs), found neither")
    return found


def finished(run: Path) -> bool:
    """Whether a run folder's training ran to its end: its metrics.jsonl's last line holds the
    test's metrics and was not written by a stopped run (which evaluates the weights it has: the
    bench records no such run, and runs its job again)."""
    try:
        last = json.loads((run / "metrics.jsonl").read_text(encoding="utf-8").strip().splitlines()[-1])
        return "test" in last and not last.get("interrupted", False)
    except (OSError, IndexError, ValueError):
        return False


def seed(run: Path) -> int:
    """The train.seed a run folder's config.yaml holds."""
    return int(yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))["train"]["seed"])


def seed_set(run: Path) -> int:
    return seed(run) // bench.SEED_STEP


def runs_name(run: Path) -> str:
    """What names a reader's runs: the bench's folder of its preset (PRESET-joint or PRESET), else the run folder."""
    for folder in (run, run.parent):
        if folder.name.startswith("set-"):
            return folder.parent.name
    return run.name


@dataclass
class Then:
    """A later reader of a cascade (--then; C, then D, ...): its runs by (seed set, task), its
    preset, and the cross-fitted valid error of the readers before it above which a task is
    mixed with it too."""
    runs: dict[tuple[int, int | None], Path]
    preset: bench.Preset
    above: float

    def hashed(self) -> dict[str, Any]:
        return {"preset": self.preset.hash, "above": self.above}


def is_above(error: float, threshold: float) -> bool:
    """Whether a share of questions answered wrong is above the threshold, at the 6 digits the
    records keep: 5 wrong of 100 (0.05 in float32 is 0.0500000007) is not above 0.05."""
    return round(error, 6) > threshold


def mix(run_a: Path, run_b: Path, data_dir: Path | None = None, confidence: bool = False,
        stages: list[Then] = ()) -> list[dict[str, Any]] | str:
    """Per task of the two readers' runs, a bench record of the mixture: its test error, its
    valid error (the gate fitted there) and cross-fitted valid error, each reader's test error alone.
    With `stages` (C, D, ...), runs trained per task: a task whose cross-fitted valid error is
    above C's threshold is mixed again, (A ⊕ B) ⊕ C, with reader C's run of the same seed set and
    task, then with D where that is still above, and so on. Runs trained on the tasks together:
    the one model is mixed with C's joint run of the seed set, on every task. Where a reader's run
    is not there yet, its letter ('c', 'd', ...)."""
    began = time.perf_counter()
    a, b = mixture.load_pair(run_a, run_b)
    tasks = babi.parse_tasks(a.cfg.data.task)
    joint = len(tasks) > 1
    data = Path(data_dir or a.cfg.data.dir)
    splits = read_splits(data, tasks, a.cfg.data.valid_fraction)
    encoded = {s: encode_tasks(splits[s], a.vocab, a.cfg.data.memory_size) for s in SPLITS}
    if encoded["valid"] is None or encoded["test"] is None:
        raise MemnetError(f"{data}: expected valid and test files of tasks {a.cfg.data.task}: the gate is fitted "
                          f"on valid and the mixture scored on test")
    model, _, valid = mixture.fit(a, b, encoded["valid"], tasks, confidence)
    test = encoded["test"]
    result, *readers = mixture.answers(model, test)
    alone = mixture.log_probs(*readers)
    presets = {name: bench.load_preset(str(r.run / "config.yaml")) for name, r in (("a", a), ("b", b))}
    gate = {**GATE, "confidence": True} if confidence else GATE  # (a gate over the words alone: hashed as before)
    hashed = {"a": presets["a"].hash, "b": presets["b"].hash, "gate": gate}
    cascades, runs = [{} for _ in tasks], {"a": a.run, "b": b.run}  # per task: its record's "cascade"
    if stages and not joint:
        for cascade in cascades:
            cascade["above"] = stages[0].above
    for letter, stage in zip(LATER, stages):
        # a joint model answers every task, so it takes C on every task: no threshold is read
        key = "then" if letter == "c" else f"then_{letter}"
        hashed[key] = {"preset": stage.preset.hash} if joint else stage.hashed()
    before, inner = "ab", (a, b)  # the readers mixed so far, and the two that `model` mixes
    for letter, stage in zip(LATER, stages):
        for cascade, v in zip(cascades, valid):
            cascade[f"crossfit_valid_error_{before}"] = round(v["crossfit_valid_error"], 6)
        if not (joint or is_above(valid[0]["crossfit_valid_error"], stage.above)):
            break
        folder = stage.runs.get((a.cfg.train.seed // bench.SEED_STEP, None if joint else tasks[0]))
        if folder is None:
            return letter
        later = mixture.load_reader(folder)
        presets[letter] = bench.load_preset(str(folder / "config.yaml"))
        if presets[letter].hash != stage.preset.hash:
            raise MemnetError(f"{folder}: trained with another preset than --then-config {stage.preset.name}")
        so_far = mixture.as_reader(model, *inner)
        mixture.check_pair(so_far, later)
        model, _, valid = mixture.fit(so_far, later, encoded["valid"], tasks, confidence)
        result, so_far_result, later_result = mixture.answers(model, test)
        for t, cascade in zip(tasks, cascades):
            rows = test.task == task_number(t)
            cascade.update({f"test_error_{k}": round(mixture.error(r.logits, test.answer, rows), 6)
                            for k, r in ((before, so_far_result), (letter, later_result))})
        runs[letter] = later.run
        before, inner = before + letter, (so_far, later)
    scored = metrics(result, test)["tasks"]  # A's attention, hop by hop
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()
    code = bench.commit()
    seconds = round(time.perf_counter() - began, 1)
    records = []
    for t, v, cascade in zip(tasks, valid, cascades):
        rows = test.task == task_number(t)
        h = scored[v["task"]]
        error = mixture.error(result.logits, test.answer, rows)
        records.append({
            "preset": "", "preset_hash": digest, "commit": code[0], "dirty": code[1], "data": data.name, "task": t,
            "set": a.cfg.train.seed // bench.SEED_STEP, "seed": a.cfg.train.seed, "restarts": a.cfg.train.restarts,
            "valid_error": round(v["valid_error"], 6), "test_error": round(error, 6), "failed": is_failed(error),
            "mean_hops": h["mean_hops"], "hops_match_facts": bench.hops_match_facts(h),
            "hop_accuracy": h["hop_accuracy"], "test_questions": h["n"], "train_data": "official",
            **({"joint": list(tasks)} if joint else {}),
            "crossfit_valid_error": round(v["crossfit_valid_error"], 6), "share_a": round(h["share_a"], 6),
            "test_error_a": round(mixture.error(alone[0], test.answer, rows), 6),
            "test_error_b": round(mixture.error(alone[1], test.answer, rows), 6),
            **({"cascade": cascade} if cascade else {}),
            "readers": {k: {"runs": runs_name(run), "preset_hash": presets[k].hash, "run": str(run)}
                        for k, run in runs.items()},
            "seconds": seconds})
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.readers.mix_readers",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("a", type=Path, help="reader A: a preset's runs of memnet bench --runs (set-K or set-K/qaT folders), or a run folder")
    parser.add_argument("b", type=Path, help="reader B, trained on the same tasks and seed sets")
    parser.add_argument("--out", type=Path, required=True, help="bench folder: records appended to OUT/records.jsonl")
    parser.add_argument("--name", default="mix", help="the mixture's preset name in the records (default: mix)")
    parser.add_argument("--data", type=Path, help="the bAbI folder, if not where the runs were trained")
    parser.add_argument("--confidence", action="store_true",
                        help="the gate also reads each reader's top probability (how sure it is of its answer)")
    parser.add_argument("--then", type=Path, metavar="RUNS_C", action="append",
                        help="reader C's runs (memnet bench --runs): trained per task, a task whose mixture of A and B "
                             "is above --above on valid (cross-fitted) is mixed again with C, (A + B) + C; trained on "
                             "the tasks together (--joint), every task is. Again for reader D, ((A + B) + C) + D, "
                             "on the tasks still above, and so on")
    parser.add_argument("--then-config", metavar="PRESET", action="append",
                        help="with --then: reader C's preset (memnet bench --config), which its runs must have trained; "
                             "one for each --then, in the same order")
    parser.add_argument("--first-set", type=integer(0), metavar="K",
                        help="mix only the seed sets K .. K + SETS - 1 (as memnet bench counts them; default: every set both hold)")
    parser.add_argument("--sets", type=integer(1), help="with --first-set: how many seed sets (default: 1)")
    parser.add_argument("--above", type=float, default=0.05,
                        help="with --then: the cross-fitted valid error above which a task takes reader C (default 0.05)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    try:
        return run(args)
    except MemnetError as e:
        print(f"mix_readers: error: {e}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    a, b = run_folders(args.a), run_folders(args.b)
    pairs = sorted(set(a) & set(b), key=lambda k: (k[0], k[1] or 0))
    if args.sets is not None and args.first_set is None:
        raise MemnetError("--sets: counts the seed sets from --first-set K; give --first-set too")
    last = None if args.first_set is None else args.first_set + (args.sets or 1) - 1
    if last is not None:
        pairs = [(k, task) for k, task in pairs if args.first_set <= k <= last]
    if not pairs:
        which = "" if last is None else f" among seed sets {args.first_set}-{last}"
        raise MemnetError(f"{args.a} and {args.b} hold no run of the same seed set (and task) both{which}")
    thens, configs = args.then or [], args.then_config or []
    if len(thens) != len(configs):
        raise MemnetError(f"--then and --then-config: give both for each later reader (its runs and its preset), "
                          f"found {len(thens)} --then and {len(configs)} --then-config")
    if len(thens) > len(LATER):
        raise MemnetError(f"--then: at most {len(LATER)} later readers, found {len(thens)}")
    stages = []
    for runs_c, preset in zip(thens, configs):
        c = run_folders(runs_c) if runs_c.is_dir() and any(runs_c.glob("set-*/**/model.pt")) else {}
        stages.append(Then(c, bench.load_preset(preset), args.above))
    path = args.out / bench.RECORDS
    done = [r for r in bench.read_records(path) if r["preset"] == args.name] if path.exists() else []
    args.out.mkdir(parents=True, exist_ok=True)
    wanting: dict[tuple[str, int], list[int]] = {}  # (reader, seed set): the tasks that wait for its run
    for k, task in pairs:
        what = f"set {k}" + (f" qa{task}" if task is not None else "")
        if any(r["set"] == k and task in (None, r["task"]) for r in done):
            print(f"{what}: recorded in {path}")
            continue
        records = mix(a[k, task], b[k, task], args.data, args.confidence, stages)
        if isinstance(records, str):  # the letter of the reader whose run it waits for
            wanting.setdefault((records, k), []).append(task)
            print(f"{what}: " + ("" if task is None else f"above {args.above:.0%} on valid: ")
                  + f"waits for reader {records.upper()}'s run")
            continue
        records = [{**r, "preset": args.name} for r in records]
        for r in records:
            bench.append(path, r)
        errors = [r["test_error"] for r in records]
        print(f"{what}: mean test error {100 * statistics.fmean(errors):.2f}%, {sum(map(is_failed, errors))} "
              f"failed; valid {100 * statistics.fmean(r['valid_error'] for r in records):.2f}%, cross-fitted "
              f"{100 * statistics.fmean(r['crossfit_valid_error'] for r in records):.2f}%")
    for (letter, k), tasks in wanting.items():
        trained = yaml.safe_load((a[k, tasks[0]] / "config.yaml").read_text(encoding="utf-8"))["data"]
        which = f"--joint --tasks {trained['task']}" if tasks == [None] else f"--tasks {','.join(map(str, tasks))}"
        i = LATER.index(letter)
        print(f"set {k}: train reader {letter.upper()} on these tasks, then run this again: memnet bench --config "
              f"{configs[i]} {which} --sets 1 --first-set {k} --data {args.data or trained['dir']} "
              f"--runs {thens[i].parent} --out {args.out / f'reader-{letter}'}")
    print(f"the table: memnet bench --table {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
