"""Training speed at the paper's settings (d = 20, 3 hops, batch 32, 100 epochs, memory 50,
evaluation every 10 epochs; no linear start, so the 100 epochs are the whole run, as in the
reference): wall and CPU seconds per run (train(): reading the data, training, evaluating;
not the interpreter's start-up), of them the seconds spent training (shuffling and the
steps; the rest reads, evaluates and chooses the seed), and training questions per second,
for one seed and for 10 seeds trained side by side; then what the 10 seeds cost against one.

    .venv/bin/python scripts/bench_speed.py                          # qa1 and qa16 of en-valid, 1 and 10 seeds
    .venv/bin/python scripts/bench_speed.py --tasks 1 --seeds 1 --repeat 5
    .venv/bin/python scripts/bench_speed.py --seeds 10 --threads 2   # 10 seeds on both cores
    .venv/bin/python scripts/bench_speed.py --backend torch          # the torch training step
    .venv/bin/python scripts/bench_speed.py --tasks 1-20 --seeds 10  # the single-task table, 10 restarts each

The machine may be shared, and a virtual machine's speed drifts: CPU seconds of this process
and the load average are printed beside wall seconds, --repeat runs each setting several
times (the minimum and median close it), and a total closes a run of several tasks. The
first run in a fresh checkout also compiles the training loop (memnet.kernels; ~30 s, cached):
one untimed warm-up run comes first.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from memnet import babi, config, official
from memnet.trainer import train

ROOT = Path(__file__).resolve().parents[1]


def cpu_name() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main() -> None:
    default_data = official.official_dir(ROOT) / "en-valid"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=official.data_dir_arg, default=str(default_data),
                        help="bAbI folder, or a set's name after `memnet data download` (default: en-valid of the "
                             "official data: memnet.official.official_dir)")
    parser.add_argument("--tasks", default="1,16", help="tasks: 1,16 or a range like 1-20 (default: 1,16)")
    parser.add_argument("--seeds", default="1,10", help="comma-separated restart counts (default: 1,10)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per run (default: 100, the paper's)")
    parser.add_argument("--threads", type=int, default=1, help="train.threads: seeds trained at once (default: 1)")
    parser.add_argument("--backend", default="auto", help="train.backend: auto, numba or torch (default: auto)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each setting (default: 1)")
    args = parser.parse_args()
    print(f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"backend {args.backend}, threads {args.threads}", flush=True)

    def settings(task: int, seeds: int, epochs: int) -> config.Config:
        return config.load(None, {"data.dir": args.data, "data.task": str(task), "train.restarts": seeds,
                                  "train.epochs": epochs, "train.linear_start_epochs": 0,
                                  "train.threads": args.threads, "train.backend": args.backend})

    tasks = babi.parse_tasks(args.tasks)
    counts = sorted(map(int, args.seeds.split(",")))
    train(settings(tasks[0], 1, 1), progress=False, log=False)  # warm-up: compiles or loads the training loop
    totals: dict[int, list[float]] = {}
    fastest: dict[tuple[int, int], float] = {}  # (task, seeds): the quickest of its runs
    for task in tasks:
        for seeds in counts:
            cfg = settings(task, seeds, args.epochs)
            walls = []
            for _ in range(args.repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                result = train(cfg, progress=False, log=False)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                walls.append(wall)
                questions = result["train_questions"] * cfg.train.epochs * seeds
                total = totals.setdefault(seeds, [0.0, 0.0, 0])
                total[0], total[1], total[2] = total[0] + wall, total[1] + cpu, total[2] + 1
                print(f"qa{task:<3} seeds {seeds:2d}: {wall:6.2f} s wall ({result['training_seconds']:.2f} s training), "
                      f"{cpu:6.2f} s CPU per run, {questions / wall:9,.0f} training questions/s, "
                      f"test accuracy {100 * result['test']['accuracy']:.1f}% "
                      f"(best of {seeds} on validation), load {os.getloadavg()[0]:.1f}", flush=True)
            fastest[task, seeds] = min(walls)
            if args.repeat > 1:
                print(f"qa{task:<3} seeds {seeds:2d}: min {min(walls):.2f} s, median {statistics.median(walls):.2f} s "
                      f"of {args.repeat} runs", flush=True)
    for task in tasks:  # what the restarts cost: many seeds against one, each setting's quickest run
        for seeds in counts[1:]:
            print(f"qa{task:<3} {seeds} seeds cost {fastest[task, seeds] / fastest[task, counts[0]]:.1f}x "
                  f"{counts[0]} seed{'s' if counts[0] > 1 else ''}")
    for seeds, (wall, cpu, runs) in totals.items():
        if runs > 1:
            print(f"total, {runs} runs, seeds {seeds:2d}: {wall:7.1f} s wall, {cpu:7.1f} s CPU")


if __name__ == "__main__":
    main()
