"""Which numeric precision a run uses when the user leaves it to us."""

from __future__ import annotations

import tensorflow as tf

from albert_tf.hardware import cpu_flags

# ``cpu_flags`` is re-exported: it lived here before `albert_tf.hardware`.
__all__ = ["BF16_CPU_FLAGS", "PRECISIONS", "cpu_flags", "dtype_policy", "resolve_precision"]

#: What ``--precision`` accepts; "auto" is resolved by `resolve_precision`.
PRECISIONS = ("auto", "float32", "bfloat16", "float16")
# CPU features that make bfloat16 matmuls native (oneDNN dispatches to them):
# AVX-512 BF16 (Cooper Lake, Zen 4+) and AMX (Sapphire Rapids+).
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


def resolve_precision(
    precision: str,
    strategy: tf.distribute.Strategy | None = None,
    flags: set[str] | None = None,
) -> str:
    """``"auto"`` becomes a concrete precision; others pass through.

    bfloat16 where it is native and needs no loss scaling: TPUs, and CPUs
    with bf16 instructions (about 1.6x faster than float32 per ALBERT-base
    step here, ``bench/README.md``, tracking float32's loss, ``docs/pretraining.md``).
    float32 elsewhere, GPUs included: whether float16 or bfloat16 pays off
    there depends on the card, so it stays the user's choice.

    >>> resolve_precision("auto", flags={"avx2", "avx512_bf16"})
    'bfloat16'
    >>> resolve_precision("auto", flags={"avx2"})
    'float32'
    >>> resolve_precision("float16", flags={"avx512_bf16"})
    'float16'
    """
    if precision != "auto":
        return precision
    strategy = strategy or tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "bfloat16"
    if tf.config.list_logical_devices("GPU"):
        return "float32"
    flags = cpu_flags() if flags is None else flags
    return "bfloat16" if flags & set(BF16_CPU_FLAGS) else "float32"


def dtype_policy(precision: str) -> str | None:
    """The Keras dtype policy a resolved precision trains in (None: float32).

    Mixed policies keep float32 variables and compute in the lower precision.

    >>> dtype_policy("bfloat16")
    'mixed_bfloat16'
    >>> dtype_policy("float32") is None
    True
    """
    return {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[precision]
