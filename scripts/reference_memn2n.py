"""Prepare a widely used PyTorch MemN2N (nmhkahn/MemN2N-pytorch, commit a28dd92) to run here,
as the yardstick of docs/speed.md: its files are copied from a checkout into OUT with the two
changes today's Python and torch need (a `re.split` that yields None, `loss.data[0]` of a
0-dimensional loss) and a stand-in for the `six` package; nothing else changes, so it trains as
published (d = 20, 3 hops, 100 epochs, batch 32, evaluation every 10 epochs).

    git clone https://github.com/nmhkahn/MemN2N-pytorch /tmp/nmh-src
    .venv/bin/python scripts/reference_memn2n.py --repo /tmp/nmh-src --out /tmp/nmh

It prints the command that trains qa1 with it (run it from OUT); farm-bench pairs that with
`memnet train` (docs/speed.md).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

FIXES = {  # file: (published text, text that runs on Python 3.11 and torch 2)
    "data_utils.py": ('if x.strip()]', 'if x and x.strip()]'),
    "trainer.py": ("loss.data[0]", "loss.item()"),
}


def prepare(repo: Path, out: Path) -> None:
    source = repo / "memn2n"
    if not (source / "trainer.py").is_file():
        sys.exit(f"reference_memn2n: {source} has no trainer.py; --repo is a checkout of nmhkahn/MemN2N-pytorch")
    out.mkdir(parents=True, exist_ok=True)
    for path in source.glob("*.py"):
        text = path.read_text()
        if path.name in FIXES:
            old, new = FIXES[path.name]
            if old not in text:
                sys.exit(f"reference_memn2n: {path} lacks {old!r}: not commit a28dd92 of MemN2N-pytorch")
            text = text.replace(old, new)
        (out / path.name).write_text(text)
    six = out / "six"
    six.mkdir(exist_ok=True)
    (six / "__init__.py").write_text("")
    (six / "moves.py").write_text("from functools import reduce\nrange = range\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of nmhkahn/MemN2N-pytorch")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the runnable copy into")
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/babi/en",
                        help="folder of the official bAbI en files (default: ../shared/babi/en)")
    args = parser.parse_args()
    prepare(args.repo, args.out)
    print(f"cd {args.out} && {sys.executable} -W ignore train.py --task 1 --dataset_dir {args.data}/")


if __name__ == "__main__":
    main()
