"""Tolerances from floating-point arithmetic, for tests that compare two computations
of one function that are not bit-identical.

Two graphs of the same model (the Keras training graph against a SavedModel's
serving graph, fused C++ kernels against stock ops, oneDNN's fused LayerNorm
against its ten ops, LiteRT against TensorFlow) round differently: the sums run in
another order, products are fused into FMAs or not, and each CPU kind (AVX2,
AVX-512, AVX-512 with VNNI or BF16) picks its own oneDNN kernels. A tolerance set
from what one machine happened to show fails on the next kind (issue 29: 1.14e-5
against ``atol=1e-5`` on an Intel Xeon). The budget here comes from the arithmetic
instead:

- one float32 rounding is off by at most ``u = 2**-24`` relative;
- a length-``n`` dot product in any order is off by about ``sqrt(n) * u`` relative
  to ``sum |x_i y_i|`` (rounding errors behave as independent random signs:
  Higham and Mary, "A new approach to probabilistic rounding error analysis",
  SIAM J. Sci. Comput. 2019); the worst case ``n * u`` is never met by real data;
- a chain of ``depth`` such reductions adds their errors (first order);
- two evaluations may each be off that much, in opposite directions: twice;
- LayerNorm divides by a standard deviation and softmax exponentiates, which
  amplify relative errors by a small factor on the tests' random weights:
  ``conditioning`` (default 4) covers it.

Comparisons are *normwise*: ``max |actual - desired| <= rtol * max |desired|``.
An elementwise relative test would demand float32 precision of outputs that are
sums cancelling to near zero, which no reordering keeps.

The budget is far below what a real defect gives: a wrong mask, scale, epsilon of
the wrong size, a dropped bias or a swapped weight moves outputs by 1e-3 to 1e-1 of
their magnitude, while the tests' two-layer model gets 7e-5 of it
(`albert_budget`; tests/helpers/test_numerics.py checks these helpers).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

#: Unit roundoff: half the distance from 1.0 to the next number.
FLOAT32_UNIT_ROUNDOFF = 2.0**-24
BFLOAT16_UNIT_ROUNDOFF = 2.0**-8


def float32_budget(*, depth: int, width: int, conditioning: float = 4.0) -> float:
    """Normwise relative difference two float32 evaluations of one function may show.

    Args:
        depth: reductions chained from input to output (matmuls, attention products).
        width: the longest reduction (a contraction dimension or sequence length).
        conditioning: how much LayerNorm / softmax amplify relative errors.
    """
    return 2 * conditioning * depth * math.sqrt(width) * FLOAT32_UNIT_ROUNDOFF


def albert_depth_and_width(config: Any, seq_length: int, head: bool = True) -> tuple[int, int]:
    """``(depth, width)`` of an ALBERT forward pass, for `float32_budget`.

    Per layer application six chained reductions: the fused q/k/v projection, the
    scores (over the head size), the context (over the sequence), the output
    projection and the two feed-forward projections. Before them the E→H
    projection; after them the pooler and a head.
    """
    depth = 1 + 6 * config.num_hidden_layers + (2 if head else 0)
    width = max(config.embedding_size, config.hidden_size, config.intermediate_size, seq_length)
    return depth, width


def albert_budget(config: Any, seq_length: int, head: bool = True) -> float:
    """`float32_budget` for an ALBERT forward pass of ``config`` on ``seq_length`` tokens."""
    depth, width = albert_depth_and_width(config, seq_length, head)
    return float32_budget(depth=depth, width=width)


def max_normwise_difference(actual: Any, desired: Any) -> float:
    """``max |actual - desired| / max |desired|`` (the denominator at least 1e-30)."""
    actual = np.asarray(actual, np.float64)
    desired = np.asarray(desired, np.float64)
    assert actual.shape == desired.shape, (actual.shape, desired.shape)
    if actual.size == 0:
        return 0.0
    return float(np.abs(actual - desired).max() / max(np.abs(desired).max(), 1e-30))


def assert_normwise_close(actual: Any, desired: Any, *, rtol: float, what: str = "") -> None:
    """``max |actual - desired| <= rtol * max |desired|``, with the numbers in the message."""
    actual = np.asarray(actual, np.float64)
    desired = np.asarray(desired, np.float64)
    assert actual.shape == desired.shape, (what, actual.shape, desired.shape)
    scale = float(np.abs(desired).max()) if desired.size else 0.0
    diff = float(np.abs(actual - desired).max()) if desired.size else 0.0
    _record(what, diff, scale, rtol)
    assert diff <= rtol * scale, (
        f"{what + ': ' if what else ''}differ by {diff / max(scale, 1e-30):.3g} of their "
        f"magnitude {scale:.3g} (allowed {rtol:.3g}); largest difference {diff:.3g}"
    )


def assert_all_normwise_close(
    actual: Mapping[str, Any], desired: Mapping[str, Any], *, rtol: float
) -> None:
    """`assert_normwise_close` for each key of ``desired``."""
    for key in desired:
        assert_normwise_close(actual[key], desired[key], rtol=rtol, what=key)


def _record(what: str, diff: float, scale: float, rtol: float) -> None:
    """With ``ALBERT_TF_NUMERICS_LOG=FILE``, appends each comparison's measured
    difference (how the budgets' margins were measured on each CPU kind)."""
    path = os.environ.get("ALBERT_TF_NUMERICS_LOG")
    if not path:
        return
    entry = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0],
        "what": what,
        "max_abs_diff": diff,
        "magnitude": scale,
        "normwise": diff / max(scale, 1e-30),
        "rtol": rtol,
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


#: oneDNN's instruction-set names (``ONEDNN_MAX_CPU_ISA``), best first, each with the
#: /proc/cpuinfo flags it needs.
ISA_LADDER: tuple[tuple[str, frozenset[str]], ...] = (
    ("AVX512_CORE_AMX", frozenset({"avx512f", "avx512bw", "avx512_bf16", "amx_int8"})),
    ("AVX512_CORE_BF16", frozenset({"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"})),
    ("AVX512_CORE_VNNI", frozenset({"avx512f", "avx512bw", "avx512vl", "avx512_vnni"})),
    ("AVX512_CORE", frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})),
    ("AVX2", frozenset({"avx2", "fma"})),
    ("AVX", frozenset({"avx"})),
    ("SSE41", frozenset({"sse4_1"})),
)


def lower_isa(flags: set[str]) -> str | None:
    """One step below the best instruction set the CPU has (None: nothing lower)."""
    have = [name for name, needs in ISA_LADDER if needs <= flags]
    return have[1] if len(have) > 1 else None


#: The caps (tests/test_cpu_kinds.py) under which oneDNN multiplies u8 · s8 without
#: VNNI: pairs of products are summed in 16 bits and may saturate (oneDNN's int8
#: notes). That is not rounding, and the int8 tests are not about it.
NO_VNNI_CAPS = tuple(name for name, needs in ISA_LADDER if not needs & {"avx512_vnni", "amx_int8"})


def int8_skip_reason() -> str | None:
    """Why TensorFlow's int8 matmul is not tested here (None: it is)."""
    from albert_tf.hardware import ONEDNN_DTYPE_FLAGS, onednn_runs

    if not onednn_runs("int8"):
        return f"TensorFlow's int8 matmul needs one of {ONEDNN_DTYPE_FLAGS['int8']} on the CPU"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap in NO_VNNI_CAPS:
        return f"oneDNN is held to {cap}, without VNNI: u8 x s8 sums may saturate"
    return None
