"""What this machine's CPU offers, read without importing TensorFlow.

A low-level module: the kernel build (`albert_tf.kernels.build`, which keys
its cache by CPU features) and the precision policy
(`albert_tf.training.precision`) both read it, so neither reaches into the
other's layer.
"""

from __future__ import annotations


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
