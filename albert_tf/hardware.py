"""What this machine's CPU offers, read without importing TensorFlow.

A low-level module: the kernel build (`albert_tf.kernels.build`, which keys
its cache by CPU features) and the precision policy
(`albert_tf.training.precision`) both read it, so neither reaches into the
other's layer.
"""

from __future__ import annotations

import glob
import os

#: The CPU features with which TensorFlow's oneDNN kernels take each lower
#: precision (``IsDataTypeSupportedByOneDNNOnThisCPU`` in tensorflow/core/util/util.cc).
#: Without them a bfloat16 matmul falls back to Eigen (correct, slow), and the
#: quantized int8 matmul computes nothing (an empty tensor eagerly, no output in a
#: graph): int8 does not run at all, as on AVX2-only CPUs (AMD Zen 1-3, Intel
#: before Skylake-SP).
ONEDNN_DTYPE_FLAGS = {
    "bfloat16": ("avx512f", "avx_ne_convert"),
    "int8": ("avx512f", "avx_vnni_int8"),
}
#: The flags that decide a precision's speed or whether it runs, which benchmarks
#: and exports record beside their numbers.
PRECISION_CPU_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "avx_vnni",
    "avx_vnni_int8",
    "avx_ne_convert",
    "amx_bf16",
    "amx_int8",
    "amx_tile",
)


def cpu_flags(cpuinfo_path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU feature flags Linux reports; empty where it reports none."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def nvidia_device_present() -> bool:
    """Whether the machine has an NVIDIA device node: ``/dev/nvidia0``... on Linux,
    ``/dev/dxg`` under WSL2."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/dxg")


def onednn_runs(precision: str, flags: set[str] | None = None) -> bool:
    """Whether TensorFlow's oneDNN kernels take ``precision`` ("bfloat16", "int8") here.

    >>> onednn_runs("int8", flags={"avx2", "fma"})
    False
    >>> onednn_runs("int8", flags={"avx2", "avx512f", "avx512_vnni"})
    True
    """
    flags = cpu_flags() if flags is None else flags
    return bool(flags & set(ONEDNN_DTYPE_FLAGS[precision]))
