"""The Numba kernel (memnet/kernels/numba_memn2n.py) of a git revision against the working tree's:
the same data, the same starting weights and the same data order, epochs taken in turn.
Prints each loop's microseconds per training question (the median epoch) and the largest
difference between the weights they reach. This virtual machine's speed drifts by up to
1.5x within minutes, so two benchmark runs minutes apart cannot show a 1.2x change; epochs
taken in turn see the same machine. The revision's loop is compiled once (about 20 s) and
cached in runs/compare/.

    .venv/bin/python scripts/compare_loops.py 86fd8d8                            # qa1 of en-valid
    .venv/bin/python scripts/compare_loops.py 86fd8d8 --task 16 --set model.stopping=true
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from memnet import babi, config, official
from memnet.config import resolve
from memnet.data import Vocab, encode_tasks, read_splits
from memnet.kernels import numba_memn2n
from memnet.models import build_model, init_weights
from memnet.train import random_noise_time

KERNEL = "memnet/kernels/numba_memn2n.py"

ROOT = Path(__file__).resolve().parents[1]


def loop_at(revision: str, folder: Path):
    """The kernel as it was at `revision`, written into `folder` and imported from there."""
    source = subprocess.run(["git", "show", f"{revision}:{KERNEL}"], cwd=ROOT, capture_output=True, text=True)
    if source.returncode != 0:
        raise SystemExit(f"compare_loops: no {KERNEL} at {revision!r} (revisions before the kernel "
                         f"interface had memnet/fast.py; time those with scripts/bench_speed.py): {source.stderr.strip()}")
    name = "kernel_" + "".join(c if c.isalnum() else "_" for c in revision)
    path = folder / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != source.stdout:  # rewritten only when it changed: Numba's cache holds
        path.write_text(source.stdout)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Numba's cache finds the module of a loop it loads by name
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help=f"a git revision whose {KERNEL} to time against the working tree's")
    parser.add_argument("--data", type=official.data_dir_arg, default=str(official.official_dir(ROOT) / "en-valid"),
                        help="bAbI folder, or a set's name after `memnet data download` (default: en-valid of the "
                             "official data: memnet.official.official_dir)")
    parser.add_argument("--task", default="1", help="task (default: 1)")
    parser.add_argument("--epochs", type=int, default=30, help="epochs each loop trains (default: 30)")
    parser.add_argument("--folder", default=str(ROOT / "runs" / "compare"),
                        help="where the revision's loop and its compiled cache go (default: runs/compare)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config setting, as memnet train's")
    args = parser.parse_args(argv)

    if any("=" not in item for item in args.set):
        parser.error(f"--set: expected KEY=VALUE, found {next(i for i in args.set if '=' not in i)!r}")
    overrides = dict(item.split("=", 1) for item in args.set)
    cfg = resolve(config.load(None, {"data.dir": args.data, "data.task": args.task, "train.restarts": 1,
                                     "train.linear_start_epochs": 0, **overrides}), 1)
    torch.set_flush_denormal(True)  # as train() does
    splits = read_splits(cfg.data.dir, babi.parse_tasks(cfg.data.task), cfg.data.valid_fraction)
    vocab = Vocab.build((s for ss in splits["train"].values() for s in ss), every_word=cfg.model.vocabulary_softmax,
                        phrases=cfg.model.phrase_answers)
    data = encode_tasks(splits["train"], vocab, cfg.data.memory_size).trim()
    tc = cfg.train

    def kernel(module):
        return module.Training([init_weights(build_model(cfg, vocab), cfg, 0)], data, max_grad_norm=tc.max_grad_norm)

    loops = {args.revision: kernel(loop_at(args.revision, Path(args.folder))), "working tree": kernel(numba_memn2n)}
    N, M = len(data), data.story.shape[1]
    generator = torch.Generator().manual_seed(tc.seed)
    seconds: dict[str, list[float]] = {name: [] for name in loops}
    for epoch in range(args.epochs + 1):  # epoch 0 compiles or loads both loops: not timed
        order = torch.randperm(N, generator=generator)[None]
        ages = random_noise_time(N, M, tc.random_noise, generator)[None].gather(1, order[..., None].expand(1, N, M))
        lr = tc.lr * 0.5 ** (epoch // tc.lr_decay_every)
        for name, loop in loops.items():
            began = time.perf_counter()
            loop.epoch(order.numpy(), ages.numpy(), lr, tc.batch_size, False)
            if epoch > 0:
                seconds[name].append(time.perf_counter() - began)
    old, new = (loop.state_dict(0) for loop in loops.values())
    difference = max(float((old[k] - new[k]).abs().max()) for k in old)
    per_question = {name: statistics.median(s) / N * 1e6 for name, s in seconds.items()}
    (old, new) = per_question.values()
    label = f"qa{args.task}" + (f" ({', '.join(args.set)})" if args.set else "")
    print(f"{label}: {args.revision} {old:.2f} µs per question, working tree {new:.2f} µs "
          f"({old / new:.2f}x), median of {args.epochs} epochs each; largest weight difference {difference:.1e}")


if __name__ == "__main__":
    main()
