"""`memnet bench`: presets on every (task, seed set), records, and the table (memnet.bench)."""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from memnet import babi, official
from memnet.cli import integer
from memnet.errors import MemnetError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench", help="train presets on every (task, seed set); records and a table of mean and range over sets",
        description="Train each preset on each task and seed set (set k: train.seed = 100 k, the preset's restarts "
                    "from there), one model per task, chosen on valid and reported on test. Each run appends a "
                    "record to OUT/records.jsonl; a run already recorded there is skipped, so the same command "
                    "resumes a stopped bench. Then prints the table: per task and in the mean, the mean and range "
                    "over the sets of test and valid error, failed tasks and hops. --table RECORDS prints the "
                    "table of an existing records file and trains nothing.")
    p.add_argument("--config", action="append", default=[], metavar="NAME_OR_PATH",
                   help="a preset: a YAML config file, or a name: default (the repository's config.yaml), else configs/NAME.yaml; "
                        "repeat for several (default: default)")
    p.add_argument("--tasks", default="1-20", help="tasks, one model each: 1-20, 1,2,16 ... (default: 1-20)")
    p.add_argument("--sets", type=integer(1), default=6, help="how many seed sets (default: 6)")
    p.add_argument("--first-set", type=integer(0), default=0,
                   help="the first seed set K: sets K .. K + SETS - 1, train.seed 100 K, ... (default: 0)")
    p.add_argument("--data", default="en-valid",
                   help="folder of bAbI files with train, valid and test, or an official set's name after "
                        "`memnet data download` (default: en-valid)")
    p.add_argument("--train-on", metavar="SOURCE", dest="train_on",
                   help="what each model trains on: official (the --data set's train and valid files; the default), "
                        "generated (1000 questions per task of memnet's generator, 100 more as valid) or generated:N "
                        "(N, and N/10 as valid), or official+generated[:N] (the official train file and N generated "
                        "questions, chosen on the official valid file); set k generates with seed 100 k, and the test "
                        "is --data's test file always")
    p.add_argument("--joint", action="store_true",
                   help="one model per seed set trained on all --tasks together (as memnet train --task 1-20), "
                        "a record per task from it, in a table of its own (the joint preset is made for it)")
    p.add_argument("--out", help="folder of the bench: records.jsonl, presets/ (the config behind each hash)")
    p.add_argument("--runs", metavar="DIR",
                   help="keep each job's run folder (model.pt, config.yaml, metrics.jsonl) under DIR/PRESET/set-K[/qaT], "
                        "for memnet eval and inspect; a job run again replaces its folder (default: not kept)")
    p.add_argument("--jobs", type=integer(1), default=1,
                   help="runs at once, each in its own local process with one thread (default: 1)")
    p.add_argument("--submitit", metavar="CLUSTER", choices=["slurm", "local", "auto"],
                   help="run the jobs through submitit (pip install 'memnet[cluster]') instead of local processes: "
                        "slurm (one job array), local (processes of this machine) or auto (slurm where there is one); "
                        "its files go to OUT/submitit")
    p.add_argument("--submitit-set", action="append", default=[], metavar="KEY=VALUE", dest="cluster",
                   help="a submitit parameter of every job, e.g. slurm_partition=cpu, timeout_min=600 or "
                        "slurm_array_parallelism=100 (repeatable; default: timeout_min=240, cpus_per_task=1)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", dest="overrides",
                   help="a config override on every preset, e.g. --set train.restarts=1 (repeatable; it changes "
                        "the presets' hashes)")
    p.add_argument("--table", metavar="RECORDS", help="print the table of this records file; trains nothing")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown, for docs")
    p.add_argument("--choose-on-valid", metavar="CANDIDATES", dest="candidates",
                   help="YAML mapping each task (or default) to a list of preset names: per task and set, the "
                        "candidate with the lowest valid error is reported (test is never read for the choice); "
                        "without --table its presets are trained too")
    p.set_defaults(func=run_bench)


def overrides(texts: list[str], flag: str = "--set", form: str = "SECTION.KEY=VALUE") -> dict[str, str]:
    out = {}
    for text in texts:
        k, sep, value = text.partition("=")
        if not sep or not k:
            raise MemnetError(f"{flag}: expected {form}, found {text!r}")
        out[k] = value
    return out


def run_bench(args: argparse.Namespace) -> int:
    from memnet import bench  # torch loads only when a command runs (memnet --help starts at once)

    candidates = bench.read_candidates(args.candidates) if args.candidates else None
    if args.table:
        given = [f for f, v in (("--config", args.config), ("--out", args.out), ("--set", args.overrides),
                                ("--train-on", args.train_on), ("--joint", args.joint), ("--runs", args.runs)) if v]
        if given:
            raise MemnetError(f"{given[0]}: --table prints a records file's table and trains nothing")
        records = bench.read_records(args.table)
    else:
        records = train(args, candidates)
    if not records:
        raise MemnetError(f"{args.table}: no records")
    render = bench.markdown if args.markdown else bench.text
    if candidates:
        chosen = bench.choose_on_valid(records, candidates)
        if not chosen:
            raise MemnetError("no task has a record of every one of its candidates in the same seed set")
        tables = [(bench.title(chosen, len(bench.candidate_names(candidates))), chosen)]
    else:
        tables = [(bench.title(group), group) for group in bench.columns(records)]
    print("\n\n".join(render(name, bench.table(group)) for name, group in tables))
    return 0


def train(args: argparse.Namespace, candidates: dict | None) -> list[dict]:
    from memnet import bench, train_on

    if not args.out:
        raise MemnetError("--out: required to train (or give --table RECORDS)")
    training = train_on.parse(args.train_on or "official")
    try:
        tasks = babi.parse_tasks(args.tasks)
    except ValueError as e:
        raise MemnetError(f"--tasks: {e}") from None
    if babi.CHAIN in tasks:
        raise MemnetError("--tasks: the bench runs the 20 bAbI tasks, not chain")
    if args.joint and len(tasks) < 2:
        raise MemnetError(f"--joint: one model learns several tasks together; --tasks gives {len(tasks)}")
    names = list(dict.fromkeys([*args.config, *(bench.candidate_names(candidates) if candidates else [])]))
    presets = [bench.load_preset(name, overrides(args.overrides)) for name in names or ["default"]]
    data = official.resolve_data_dir(args.data)
    if not Path(data).is_dir():
        raise MemnetError(f"{args.data}: no such data folder")
    sets = range(args.first_set, args.first_set + args.sets)
    if args.submitit and args.jobs != 1:
        raise MemnetError("--jobs: with --submitit the cluster runs the jobs (--submitit-set slurm_array_parallelism=N)")
    if args.cluster and not args.submitit:
        raise MemnetError("--submitit-set: give --submitit CLUSTER too")
    # submitit's parameters are numbers, words and lists: read as YAML scalars (600 -> 600, cpu -> 'cpu')
    cluster = {k: yaml.safe_load(v) for k, v in overrides(args.cluster, "--submitit-set", "KEY=VALUE").items()}
    return bench.run(presets, tasks, sets, data, args.out, args.jobs,
                     submitit=(args.submitit, cluster) if args.submitit else None, training=training,
                     joint=args.joint, runs=args.runs)
