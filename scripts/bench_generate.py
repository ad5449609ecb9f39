"""Peak memory and time of `memnet generate` for large sizes: it streams story by story, so the
peak should not grow with the number of questions.

    python scripts/bench_generate.py --sizes 10000 1000000 10000000 --task 1

Each size runs `python -m memnet generate --task T --train N --test 0` in a fresh process
(into a temporary folder, removed afterwards) and prints its peak resident memory (the
kernel's ru_maxrss of the child), its wall time and the file's size.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(task: str, size: int) -> tuple[float, float, int]:
    """(peak RSS in MB, wall seconds, bytes written) of one generate run in a child process."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "memnet", "generate", "--task", task, "--train", str(size), "--test", "0", "--out", out]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        start = time.perf_counter()
        # a fresh wait4 per child: ru_maxrss of RUSAGE_CHILDREN is the maximum over all children so far
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(cmd)} failed with status {os.waitstatus_to_exitcode(status)}")
        written = sum(f.stat().st_size for f in Path(out).iterdir())
    return usage.ru_maxrss / 1024, wall, written  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000], help="questions per run")
    parser.add_argument("--task", default="1", help="task to generate (default: 1)")
    args = parser.parse_args()
    print("| task | questions | peak RSS (MB) | wall (s) | file (MB) |\n| --- | ---: | ---: | ---: | ---: |")
    for size in args.sizes:
        rss, wall, written = measure(args.task, size)
        print(f"| {args.task} | {size:,} | {rss:.0f} | {wall:.1f} | {written / 1e6:.0f} |", flush=True)


if __name__ == "__main__":
    main()
