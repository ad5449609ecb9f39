"""What this processor can do with the default's densest arithmetic, the answer module (U: 2d x H,
d = 50, H = 64, every hop): on one core, as the kernel does it (one question at a time, Numba
loops: U^T x forward, then ∂U += x ∂pre and ∂x = U ∂pre back) and as a batch would (a batch's 32
questions as matrix products, NumPy's BLAS), in multiply-adds per second.

    .venv/bin/python scripts/bench_limit.py

The kernel keeps the first: it adds each question's gradient in the order the reference model
does, so that its runs are the reference's to the last digit; the second adds them in another
order. docs/speed.md quotes both beside the kernel's own rate.
"""
from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core: BLAS reads it when NumPy loads

import numba  # noqa: E402
import numpy as np  # noqa: E402


@numba.njit(fastmath=True, error_model="numpy")
def per_question(U, g_U, x, g_pre, pre, rounds):
    """rounds x (pre = U^T x; ∂U += x ∂pre; ∂x = U ∂pre), the kernel's loop order."""
    rows, hidden = U.shape
    total = np.float32(0.0)
    for _ in range(rounds):
        pre[:] = 0.0
        for k in range(rows):
            for j in range(hidden):
                pre[j] += x[k] * U[k, j]
        for k in range(rows):
            g_x = np.float32(0.0)
            for j in range(hidden):
                g_U[k, j] += x[k] * g_pre[j]
                g_x += U[k, j] * g_pre[j]
            total += g_x
    return total


def rate(seconds: float, madds: float) -> str:
    return f"{madds / seconds / 1e9:.2f} G multiply-adds/s"


def main() -> None:
    rows, hidden, batch, rounds = 100, 64, 32, 20000
    rng = np.random.default_rng(0)
    U = rng.standard_normal((rows, hidden), dtype=np.float32)
    g_U = np.zeros_like(U)
    x = rng.standard_normal(rows, dtype=np.float32)
    g_pre, pre = rng.standard_normal(hidden, dtype=np.float32), np.zeros(hidden, np.float32)
    per_question(U, g_U, x, g_pre, pre, 1)  # compile
    began = time.perf_counter()
    per_question(U, g_U, x, g_pre, pre, rounds)
    seconds = time.perf_counter() - began
    madds = 3 * rows * hidden * rounds
    print(f"one question at a time (Numba loops): {1e6 * seconds / rounds:.2f} µs per pass, {rate(seconds, madds)}")
    X, G = rng.standard_normal((batch, rows), dtype=np.float32), rng.standard_normal((batch, hidden), dtype=np.float32)
    began = time.perf_counter()
    for _ in range(rounds // batch):
        X @ U  # pre for the batch
        g_U += X.T @ G
        G @ U.T
    seconds = time.perf_counter() - began
    print(f"a batch of {batch} as matrix products (BLAS): {1e6 * seconds / (rounds // batch * batch):.2f} µs per question, "
          f"{rate(seconds, madds // rounds * (rounds // batch) * batch)}")


if __name__ == "__main__":
    main()
