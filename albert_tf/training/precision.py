"""Which numeric precision a run uses when the user leaves it to us."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from albert_tf.hardware import cpu_flags
from albert_tf.training.choices import PRECISIONS
from albert_tf.training.devices import BF16_CPU_FLAGS, Devices, auto_precision

# ``cpu_flags`` is re-exported: it lived here before `albert_tf.hardware`.
__all__ = ["BF16_CPU_FLAGS", "PRECISIONS", "cpu_flags", "dtype_policy", "resolve_precision"]

# PRECISIONS: what ``--precision`` accepts; "auto" is resolved by `resolve_precision`.


def resolve_precision(
    precision: str,
    strategy: tf.distribute.Strategy | None = None,
    flags: set[str] | None = None,
    devices: Devices | None = None,
) -> str:
    """``"auto"`` becomes a concrete precision (`albert_tf.training.devices.auto_precision`
    on the devices found, or on ``devices``); others pass through.

    On CPU, bfloat16 is about 1.6x faster than float32 per ALBERT-base step where
    it is native (``docs/results.md``, ``pretraining_step``).

    >>> resolve_precision("auto", flags={"avx2", "avx512_bf16"})
    'bfloat16'
    >>> resolve_precision("auto", flags={"avx2"})
    'float32'
    >>> resolve_precision("auto", devices=Devices(gpus=((7, 5),)))
    'float16'
    >>> resolve_precision("float16", flags={"avx512_bf16"})
    'float16'
    """
    if precision != "auto":
        return precision
    if devices is None:
        devices = Devices.detect(strategy or tf.distribute.get_strategy())
        if flags is not None:
            devices = dataclasses.replace(devices, cpu_flags=frozenset(flags))
    return auto_precision(devices)


def dtype_policy(precision: str) -> str | None:
    """The Keras dtype policy a resolved precision trains in (None: float32).

    Mixed policies keep float32 variables and compute in the lower precision.

    >>> dtype_policy("bfloat16")
    'mixed_bfloat16'
    >>> dtype_policy("float32") is None
    True
    """
    return {"float32": None, "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[precision]
