"""This machine's peak matmul throughput, the denominator of MFU."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def matmul_sizes(smoke: bool) -> list[tuple[int, int, int]]:
    """(m, k, n): square sizes, plus ALBERT-base's FFN matmul (tokens × H × FFN)."""
    if smoke:
        return [(128, 128, 128), (256, 256, 256)]
    return [(1024, 1024, 1024), (2048, 2048, 2048), (3072, 3072, 3072), (2048, 768, 3072)]


def measure_matmul(framework: str, precision: str, smoke: bool, repeats: int = 5) -> dict[str, Any]:
    """Best GFLOP/s of one matmul over a few sizes (best of ``repeats`` each)."""
    if framework == "tf":
        import tensorflow as tf

        dtype = {"float32": tf.float32, "bfloat16": tf.bfloat16}[precision]

        @tf.function
        def mm(a, b):
            # A scalar out: the timing is the matmul, not a copy of its result.
            return tf.linalg.matmul(a, b)[0, 0]

        def make(m: int, k: int, n: int) -> Callable[[], Any]:
            a = tf.cast(tf.random.normal((m, k)), dtype)
            b = tf.cast(tf.random.normal((k, n)), dtype)
            return lambda: mm(a, b).numpy()

    else:
        import torch

        dtype_t = {"float32": torch.float32, "bfloat16": torch.bfloat16}[precision]

        def make(m: int, k: int, n: int) -> Callable[[], Any]:
            a = torch.randn(m, k).to(dtype_t)
            b = torch.randn(k, n).to(dtype_t)
            return lambda: torch.mm(a, b)

    by_size = {}
    for m, k, n in matmul_sizes(smoke):
        run = make(m, k, n)
        run()  # trace / allocate
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
        by_size[f"{m}x{k}x{n}"] = round(2 * m * k * n / best / 1e9, 1)
    return {"gflops_by_size": by_size, "best_gflops": max(by_size.values())}
