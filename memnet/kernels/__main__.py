"""Compile the kernels into Numba's cache now, so that the first `memnet train` after install
starts as fast as every later one: `python -m memnet.kernels` (./scripts/setup runs it).

It trains the built-in defaults for one epoch on a few generated qa1 stories, in a temporary
folder: the kernels compile for the argument types that every run passes them, whatever its
data or settings, so this one run fills the cache for all of them.
"""
from __future__ import annotations

import sys
import tempfile
import time

from memnet import api


def warm() -> float:
    """Train once on tiny generated data; returns the seconds it took."""
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memnet-warm-") as folder:
        api.generate(1, 40, seed=0, out=folder)
        api.generate(1, 20, seed=0, split="test", out=folder)
        api.train(None, data=folder, task=1, quiet=True,
                  overrides={"train.epochs": 1, "train.restarts": 1, "train.linear_start_epochs": 0,
                             "train.eval_every": 1, "train.backend": "numba"})
    return time.perf_counter() - began


if __name__ == "__main__":
    seconds = warm()
    print(f"memnet: the training kernel is compiled and cached ({seconds:.0f} s)", file=sys.stderr)
