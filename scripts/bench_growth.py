"""How training time grows with the work: seconds per training question (one epoch's pass, the
step and its shuffling; no start-up, no evaluation) for memnet's default preset and for a
widely used PyTorch MemN2N (nmhkahn/MemN2N-pytorch, prepared by scripts/reference_memn2n.py),
one factor at a time from qa1 with 1k questions, memory 50, 3 hops and d = 50:

    questions  1k -> 10k (generated qa1: memnet generate --train N)
    memory     50 -> 130 -> 320 sentences (the official qa3 (1k), whose stories reach 320)
    hops       3 -> 6
    dimension  20 -> 50 -> 100

    .venv/bin/python scripts/reference_memn2n.py --repo MemN2N-pytorch --out /tmp/nmh
    .venv/bin/python scripts/bench_growth.py --reference /tmp/nmh

Both models run in this process, one thread each (torch.set_num_threads(1): the reference as
one memnet run, on one core). The reference trains as published: its own data loading
(a DataLoader with one worker), SGD with gradient noise and clipping; its d and memory size
are the constructor's arguments.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from memnet import api, config
from memnet.trainer import train

SHARED = Path(__file__).resolve().parents[2] / "shared/babi/en"
BASE = {"data": "qa1 1k", "memory": 50, "hops": 3, "dim": 50}
ROWS = [{}, {"data": "qa1 10k"}, {"data": "qa3"}, {"data": "qa3", "memory": 130}, {"data": "qa3", "memory": 320},
        {"hops": 6}, {"dim": 20}, {"dim": 100}]  # each a change to BASE


def memnet_seconds(folder: Path, task: int, s: dict, epochs: int) -> float:
    """memnet's default preset: training seconds per question per epoch."""
    cfg = config.load(config.find_preset("default"), {
        "data.dir": str(folder), "data.task": str(task), "data.memory_size": s["memory"], "model.hops": s["hops"],
        "model.dim": s["dim"], "train.epochs": epochs, "train.linear_start_epochs": 0, "train.restarts": 1,
        "train.eval_every": epochs})
    result = train(cfg, progress=False, log=False)
    return result["training_seconds"] / (epochs * result["train_questions"])


def reference_seconds(reference: Path, folder: Path, task: int, s: dict, epochs: int) -> float:
    """The reference's training epoch (Trainer._train_single_epoch), per question."""
    if str(reference) not in sys.path:
        sys.path.insert(0, str(reference))
    from dataset import bAbIDataset
    from model import MemN2N
    from trainer import Trainer
    data = bAbIDataset(str(folder) + "/", task, memory_size=s["memory"])
    t = Trainer.__new__(Trainer)  # its __init__ fixes d = 20 and memory 50: built here with s's
    t.config = SimpleNamespace(cuda=False, max_clip=40.0, batch_size=32)
    t.train_loader = torch.utils.data.DataLoader(data, batch_size=32, num_workers=1, shuffle=True)
    t.mem_n2n = MemN2N({"use_cuda": False, "num_vocab": data.num_vocab, "embedding_dim": s["dim"],
                        "sentence_size": data.sentence_size, "max_hops": s["hops"]})
    t.ce_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    t.opt = torch.optim.SGD(t.mem_n2n.parameters(), lr=0.01)
    t._train_single_epoch(0)  # warm-up: the first epoch starts the loader's worker
    began = time.perf_counter()
    for epoch in range(epochs):
        t._train_single_epoch(epoch)
    return (time.perf_counter() - began) / (epochs * len(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, help="the copy scripts/reference_memn2n.py made (omit: memnet only)")
    parser.add_argument("--official", type=Path, default=SHARED, help="the official en folder, for qa3 (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=5, help="memnet's timed epochs per setting (default: 5)")
    parser.add_argument("--reference-epochs", type=int, default=1, help="the reference's (default: 1)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp, "1k"), Path(tmp, "10k")
        for folder, n in ((small, 1000), (large, 10000)):
            api.generate(1, n, seed=0, out=folder)
            api.generate(1, 1000, seed=0, split="test", out=folder)
        train(config.load(None, {"data.dir": str(small), "data.task": "1", "train.epochs": 1}), progress=False, log=False)
        print(f"{os.cpu_count()} cores, torch {torch.__version__}, one thread; seconds per training question per epoch")
        print("| setting | memnet | PyTorch MemN2N | ratio |\n| --- | ---: | ---: | ---: |")
        sources = {"qa1 1k": (small, 1), "qa1 10k": (large, 1), "qa3": (args.official, 3)}
        for change in ROWS:
            s = dict(BASE, **change)
            folder, task = sources[s["data"]]
            label = f"{s['data']}, memory {s['memory']}, {s['hops']} hops, d = {s['dim']}"
            mine = memnet_seconds(folder, task, s, args.epochs)
            theirs = reference_seconds(args.reference, folder, task, s, args.reference_epochs) if args.reference else None
            ratio = f"{theirs / mine:.0f}x" if theirs else "-"
            theirs_text = f"{1e6 * theirs:.0f} µs" if theirs else "-"
            print(f"| {label} | {1e6 * mine:.1f} µs | {theirs_text} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
