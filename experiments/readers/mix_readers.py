"""Two joint readers mixed by a gate over the question's words (mix.py), as a bench column.

Each reader is a run folder of `memnet train` on the same tasks (one model for all 20 of them,
say a memory network and a word reader). The gate is fitted on the valid split and the mixture
scored on test (mix.py fits the same gate and writes the mixture as a checkpoint); the valid
error a record holds is the fitted gate's, and its
`crossfit_valid_error` that of gates fitted on the other half of each task's valid questions:

    .venv/bin/python -m experiments.readers.mix_readers runs/joint_memn2n runs/joint_words --variant joint_mix --results mix.jsonl

(from the repository root, which puts experiments/ on the path).

One record per task is appended to `--results` as JSONL (hop accuracy
and hops used: reader A's attention, the memory network's when it is A).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from experiments.readers import mix as mixture
from memnet import babi
from memnet.data import encode_tasks, read_splits, task_number
from memnet.errors import MemnetError
from memnet.evaluation import is_failed, metrics

SPLITS = ("valid", "test")


def mix(run_a: Path, run_b: Path, data_dir: Path | None = None) -> list[dict[str, Any]]:
    """Per task of the two readers' runs: the mixture's test, valid and cross-fitted valid error
    (the gate fitted on valid, as mix.py fits it)."""
    a, b = mixture.load_pair(run_a, run_b)
    tasks = babi.parse_tasks(a.cfg.data.task)
    splits = read_splits(data_dir or a.cfg.data.dir, tasks, a.cfg.data.valid_fraction)
    data = {s: encode_tasks(splits[s], a.vocab, a.cfg.data.memory_size) for s in SPLITS}
    model, _, valid = mixture.fit(a, b, data["valid"], tasks)
    test = data["test"]
    result, *readers = mixture.answers(model, test)
    alone = mixture.log_probs(*readers)
    hops = metrics(result, test)["tasks"]  # A's attention, hop by hop
    records = []
    for t, v in zip(tasks, valid):
        rows = test.task == task_number(t)
        h = hops[v["task"]]
        records.append({
            "task": t, "error": mixture.error(result.logits, test.answer, rows), "valid_error": v["valid_error"],
            "crossfit_valid_error": v["crossfit_valid_error"], "share_a": h["share_a"],
            "error_a": mixture.error(alone[0], test.answer, rows), "error_b": mixture.error(alone[1], test.answer, rows),
            "hop_accuracy": h["hop_accuracy"], "mean_hops": h["mean_hops"], "chain_accuracy": h["chain_accuracy"],
            "hops_by_facts": h["hops_by_facts"], "questions": h["n"],
            "trained_on": a.cfg.data.task, "readers": [str(a.run), str(b.run)],
            "config": {"a": a.cfg.to_dict(), "b": b.cfg.to_dict()},
        })
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("a", type=Path, help="run folder of reader A (memnet train --out)")
    parser.add_argument("b", type=Path, help="run folder of reader B, trained on the same tasks")
    parser.add_argument("--data", type=Path, help="the bAbI folder, if not where the runs were trained")
    parser.add_argument("--variant", default="joint_mix", help="the column's name in the records")
    parser.add_argument("--results", type=Path, required=True, help="the JSONL file the records are appended to")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    try:
        records = mix(args.a, args.b, args.data)
    except MemnetError as e:
        raise SystemExit(f"error: {e}") from None
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with args.results.open("a", encoding="utf-8") as out:
        for r in records:
            out.write(json.dumps({"variant": args.variant, **r, "time": stamp}) + "\n")
    for r in records:
        print(f"qa{r['task']:<3} test {100 * r['error']:5.1f} (A {100 * r['error_a']:5.1f}, B {100 * r['error_b']:5.1f}) "
              f"| valid {100 * r['valid_error']:5.1f} | cross-fitted {100 * r['crossfit_valid_error']:5.1f} "
              f"| A's share {r['share_a']:.2f}")
    errors = [r["error"] for r in records]
    print(f"mean test error {100 * statistics.fmean(errors):.2f}%, {sum(map(is_failed, errors))} failed; "
          f"valid {100 * statistics.fmean(r['valid_error'] for r in records):.2f}%, cross-fitted "
          f"{100 * statistics.fmean(r['crossfit_valid_error'] for r in records):.2f}%")


if __name__ == "__main__":
    main()
