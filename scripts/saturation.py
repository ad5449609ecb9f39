"""Softmax saturation in the transformer reader, with and without the 1/sqrt(d_k) scaling.

For the question's attention over a story's sentences (memnet.transformer.saturation): the
mean largest weight (1.0 = one sentence takes everything) and the mean entropy in nats
(the uniform row's entropy beside it). Part 1, untrained: one layer, one head, at several
widths d_k, on the test stories of a task. The dot product of two random d_k-dimensional
vectors has variance ~d_k, so without the scaling the softmax saturates as d_k grows, and a
saturated softmax passes almost no gradient. Part 2 (--epochs N > 0): the same after
training the task's default transformer (2 layers, 2 heads, d = 20) with and without it.

    .venv/bin/python scripts/saturation.py                      # qa1 of en-valid, untrained
    .venv/bin/python scripts/saturation.py --task 2 --epochs 50 # and trained for 50 epochs
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

from memnet import babi, config, official
from memnet.data import Vocab, encode_tasks, read_splits
from memnet.models import build_model
from memnet.models.transformer import saturation
from memnet.trainer import train

ROOT = Path(__file__).resolve().parents[1]


def row(label: str, sat: dict[str, float]) -> str:
    return (f"| {label} | {sat['mean_max_weight']:.2f} | {sat['mean_entropy']:.2f} | "
            f"{sat['uniform_entropy']:.2f} |")


def main(argv: list[str] | None = None) -> None:
    default_data = official.official_dir(ROOT) / "en-valid"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=official.data_dir_arg, default=str(default_data),
                        help="bAbI folder, or a set's name after `memnet data download` (default: en-valid of the "
                             "official data: memnet.official.official_dir)")
    parser.add_argument("--task", default="1", help="task number (default: 1)")
    parser.add_argument("--widths", default="5,20,80,320", help="d_k values for the untrained part (default: 5,20,80,320)")
    parser.add_argument("--epochs", type=int, default=0, help="also train with and without scaling for this many epochs")
    args = parser.parse_args(argv)
    torch.manual_seed(0)

    task = babi.parse_tasks(args.task)
    splits = read_splits(args.data, task)
    vocab = Vocab.build(s for ss in splits["train"].values() for s in ss)
    batch = encode_tasks(splits["test"], vocab, 50)
    print(f"qa{args.task}, {len(batch)} test questions, untrained: one layer, one head, width d_k\n")
    print("| d_k, scaling | mean max weight | mean entropy | uniform entropy |")
    print("|---|---|---|---|")
    for width in map(int, args.widths.split(",")):
        for scale in (True, False):
            cfg = config.load(None, {"model.type": "transformer", "model.dim": width, "model.heads": 1,
                                     "model.layers": 1, "model.ff_dim": 4 * width, "model.scale": scale})
            model = build_model(cfg, vocab)
            with torch.no_grad():
                reading = model.read(batch)
            label = f"{width}, {'1/sqrt(d_k)' if scale else 'none'}"
            print(row(label, saturation(reading.heads, batch.length)), flush=True)

    if args.epochs > 0:
        print(f"\nqa{args.task} after {args.epochs} epochs (2 layers, 2 heads, d = 20, 1 restart), test split\n")
        print("| scaling, layer | mean max weight | mean entropy | uniform entropy | test accuracy |")
        print("|---|---|---|---|---|")
        for scale in (True, False):
            cfg = config.load(None, {"data.dir": args.data, "data.task": args.task, "model.type": "transformer",
                                     "model.scale": scale, "model.stopping": False, "model.init_std": 0.1,
                                     "train.restarts": 1, "train.epochs": args.epochs})
            result = train(cfg, progress=False, log=False)
            with torch.no_grad():
                heads = result["model"].read(batch).heads  # (B, L, H, M)
            for layer in range(heads.shape[1]):
                sat = saturation(heads[:, layer:layer + 1], batch.length)
                label = f"{'1/sqrt(d_k)' if scale else 'none'}, layer {layer + 1}"
                print(row(label, sat)[:-1] + f" {100 * result['test']['accuracy']:.1f}% |", flush=True)


if __name__ == "__main__":
    main()
