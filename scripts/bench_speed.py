"""Training speed at the paper's settings (d = 20, 3 hops, batch 32, 100 epochs, memory 50,
evaluation every 10 epochs; no linear start, so the 100 epochs are the whole run, as in the reference): wall and CPU seconds per run and training questions per second,
for one seed and for 10 seeds trained side by side.

    .venv/bin/python scripts/bench_speed.py                          # qa1 and qa16 of en-valid, 1 and 10 seeds
    .venv/bin/python scripts/bench_speed.py --tasks 1 --seeds 1
    .venv/bin/python scripts/bench_speed.py --tasks 1-20 --seeds 10  # the single-task table, 10 restarts each

The machine may be shared: CPU seconds of this process and the load average are printed
beside wall seconds, and a total closes a run of several tasks.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from memnet import babi, config
from memnet.train import train

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    default_data = babi.official_dir(ROOT) / "en-valid"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(default_data), help="bAbI folder (default: en-valid of MEMNET_BABI_DIR)")
    parser.add_argument("--tasks", default="1,16", help="tasks: 1,16 or a range like 1-20 (default: 1,16)")
    parser.add_argument("--seeds", default="1,10", help="comma-separated restart counts (default: 1,10)")
    parser.add_argument("--epochs", type=int, default=100, help="epochs per run (default: 100, the paper's)")
    args = parser.parse_args()
    totals: dict[int, list[float]] = {}
    for task in babi.parse_tasks(args.tasks):
        for seeds in map(int, args.seeds.split(",")):
            cfg = config.load(None, {"data.dir": args.data, "data.task": str(task), "train.restarts": seeds,
                                     "train.epochs": args.epochs,
                                     "train.linear_start_epochs": 0})
            wall, cpu = time.perf_counter(), time.process_time()
            result = train(cfg, progress=False, log=False)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            questions = result["train_questions"] * cfg.train.epochs * seeds
            total = totals.setdefault(seeds, [0.0, 0.0, 0])
            total[0], total[1], total[2] = total[0] + wall, total[1] + cpu, total[2] + 1
            print(f"qa{task:<3} seeds {seeds:2d}: {wall:6.2f} s wall, {cpu:6.2f} s CPU per run, "
                  f"{questions / wall:9,.0f} training questions/s, test accuracy {100 * result['test']['accuracy']:.1f}% "
                  f"(best of {seeds} on validation), load {os.getloadavg()[0]:.1f}", flush=True)
    for seeds, (wall, cpu, runs) in totals.items():
        if runs > 1:
            print(f"total, {runs} tasks, seeds {seeds:2d}: {wall:7.1f} s wall, {cpu:7.1f} s CPU")


if __name__ == "__main__":
    main()
