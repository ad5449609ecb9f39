"""Per task, the setting best on valid: of the bench records of several settings (JSONL files
written by scripts/bench_babi.py, one record per task in each), keep for each task the record
with the lowest valid error (the first file's among equals), as a column of its own.

    .venv/bin/python scripts/choose_on_valid.py --variant sup_choice sup_rq.jsonl sup_sum.jsonl --results out.jsonl

A setting chosen per task this way is chosen on valid like the restart and the epoch within a
run, and reported on test; each record keeps the file it came from in `chosen_from`. The
column has the tasks every file has; `--some FILE` adds a setting run on some tasks only (the
pair reader, say, whose cost grows with the square of a story's length), a candidate on the
tasks it has:

    .venv/bin/python scripts/choose_on_valid.py --variant sup_choice sup_rq.jsonl sup_sum.jsonl --some pairs.jsonl --results out.jsonl
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from memnet.evaluation import is_failed, read_results


def records(path: Path) -> dict[int, dict[str, Any]]:
    """{task: the file's latest record of it} (a file holds one setting's run)."""
    return {task: r for (_, task), r in read_results(path).items()}


def choose(runs: dict[str, dict[int, dict[str, Any]]], variant: str,
           some: dict[str, dict[int, dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """For every task all runs have, the record with the lowest valid error (the first run's among
    equals; `some`'s runs, after them, where they have the task), renamed `variant`, with
    `chosen_from` naming its run."""
    tasks = sorted(set.intersection(*(set(r) for r in runs.values())))
    runs = {**runs, **(some or {})}
    names = list(runs)
    chosen = []
    for task in tasks:
        name = min((n for n in names if task in runs[n]), key=lambda n: (runs[n][task]["valid_error"], names.index(n)))
        chosen.append({**runs[name][task], "variant": variant, "chosen_from": name})
    return chosen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench results (JSONL), one run of a setting each")
    parser.add_argument("--some", type=Path, action="append", default=[],
                        help="bench results of a setting run on some tasks only: a candidate where it has the task")
    parser.add_argument("--variant", required=True, help="the chosen column's name")
    parser.add_argument("--results", type=Path, required=True, help="the JSONL file the chosen records are appended to")
    args = parser.parse_args(argv)
    for f in args.files + args.some:
        if not f.is_file():
            parser.error(f"{f}: no such file")
    chosen = choose({str(f): records(f) for f in args.files}, args.variant, {str(f): records(f) for f in args.some})
    with args.results.open("a", encoding="utf-8") as out:
        for r in chosen:
            out.write(json.dumps(r) + "\n")
            print(f"qa{r['task']:<3} valid {100 * r['valid_error']:5.1f}  test {100 * r['error']:5.1f}  from {r['chosen_from']}")
    errors = [r["error"] for r in chosen]
    print(f"mean test error {100 * sum(errors) / len(errors):.2f}%, failed {sum(map(is_failed, errors))}, tasks {len(errors)}")


if __name__ == "__main__":
    main()
