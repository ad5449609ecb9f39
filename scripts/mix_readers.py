"""Two joint readers mixed by a gate over the question's words (memnet/mixture.py), as a bench column.

Each reader is a run folder of `memnet train` on the same tasks (one model for all 20 of them,
say a memory network and a word reader). The gate is fitted on the valid split and the mixture
scored on test; the valid error a record holds is the fitted gate's, and its
`crossfit_valid_error` that of gates fitted on the other half of each task's valid questions:

    .venv/bin/python scripts/mix_readers.py runs/joint_memn2n runs/joint_words --variant joint_mix --results mix.jsonl

One record per task is appended to `--results` in scripts/bench_babi.py's format (hop accuracy
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

from memnet import babi, checkpoint, mixture
from memnet.data import task_name, task_number
from memnet.errors import MemnetError
from memnet.evaluation import is_failed, metrics, predict
from memnet.models.result import Result
from memnet.train import load_data

SPLITS = ("valid", "test")


def reader(run: Path, data_dir: Path | None) -> dict[str, Any]:
    """A run's model, config, vocabulary and its valid and test Batches (its own encoding)."""
    model, cfg, vocab, _ = checkpoint.load(run / "model.pt")
    if data_dir is not None:
        cfg.data.dir = str(data_dir)
    data, _ = load_data(cfg, vocab)
    return {"run": run, "model": model, "cfg": cfg, "vocab": vocab, **{s: data[s] for s in SPLITS}}


def answers(r: dict[str, Any], split: str) -> Result:
    with torch.no_grad():
        return Result(*(t if t is None else t.cpu() for t in predict(r["model"], r[split])))


def log_probs(result: Result) -> torch.Tensor:
    return result.logits.float().log_softmax(-1)


def mix(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Per task of the two readers' runs: the mixture's test, valid and cross-fitted valid error."""
    if a["cfg"].data.task != b["cfg"].data.task:
        raise MemnetError(f"{a['run']} was trained on tasks {a['cfg'].data.task}, {b['run']} on {b['cfg'].data.task}")
    if a["vocab"].answers != b["vocab"].answers:
        raise MemnetError(f"{a['run']} and {b['run']} have different answer classes: not trained on the same data")
    for s in SPLITS:
        if not torch.equal(a[s].answer, b[s].answer):
            raise MemnetError(f"{a['run']} and {b['run']}: their {s} questions differ")
    V = len(a["vocab"])
    x = {s: mixture.question_words(a[s], V) for s in SPLITS}
    results = {s: (answers(a, s), answers(b, s)) for s in SPLITS}
    lp = {s: (log_probs(results[s][0]), log_probs(results[s][1])) for s in SPLITS}
    answer = {s: a[s].answer.cpu() for s in SPLITS}
    tasks = {s: a[s].task.cpu() for s in SPLITS}
    gate = mixture.Gate(V).fit(x["valid"], *lp["valid"], answer["valid"])
    wrong = {s: gate.mix(x[s], *lp[s]).argmax(-1) != answer[s] for s in SPLITS}
    cross = mixture.crossfit_wrong(x["valid"], *lp["valid"], answer["valid"], tasks["valid"])
    hops = metrics(results["test"][0], a["test"].to("cpu"))["tasks"]  # A's attention, hop by hop
    share = gate.share(x["test"])
    records = []
    for t in babi.parse_tasks(a["cfg"].data.task):
        n = task_number(t)
        rows = {s: tasks[s] == n for s in SPLITS}
        h = hops[task_name(n)]
        records.append({
            "task": t, "error": float(wrong["test"][rows["test"]].float().mean()),
            "valid_error": float(wrong["valid"][rows["valid"]].float().mean()),
            "crossfit_valid_error": float(cross[rows["valid"]].float().mean()),
            "share_a": float(share[rows["test"]].mean()),
            "error_a": float((lp["test"][0].argmax(-1) != answer["test"])[rows["test"]].float().mean()),
            "error_b": float((lp["test"][1].argmax(-1) != answer["test"])[rows["test"]].float().mean()),
            "hop_accuracy": h["hop_accuracy"], "mean_hops": h["mean_hops"], "chain_accuracy": h["chain_accuracy"],
            "hops_by_facts": h["hops_by_facts"], "questions": int(rows["test"].sum()),
            "trained_on": a["cfg"].data.task, "readers": [str(a["run"]), str(b["run"])],
            "config": {"a": a["cfg"].to_dict(), "b": b["cfg"].to_dict()},
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
        records = mix(reader(args.a, args.data), reader(args.b, args.data))
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
