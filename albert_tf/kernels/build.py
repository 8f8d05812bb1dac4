"""Compiles ``fused_ops.cc`` against the installed TensorFlow, once per machine.

The shared library is cached under ``$ALBERT_TF_KERNEL_CACHE`` (default
``~/.cache/albert_tf/kernels``), keyed by the source, TensorFlow's version and
compile flags, the compiler and the CPU's features (it is built with
``-march=native``). A second process finds it there; two processes compiling
at once each write a private file and move it into place, so neither sees a
half-written library.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile

from albert_tf.hardware import cpu_flags

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fused_ops.cc")
# Reassociation lets the compiler vectorise the row sums; no -ffast-math, so
# NaN and infinity still propagate as in TensorFlow's own kernels.
OPTIMIZE = [
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-fassociative-math",
    "-fno-signed-zeros",
    "-fno-trapping-math",
]


class KernelBuildError(RuntimeError):
    """The fused kernels could not be compiled or loaded."""


def cache_dir() -> str:
    return os.environ.get("ALBERT_TF_KERNEL_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "albert_tf", "kernels"
    )


def compiler() -> str:
    return os.environ.get("CXX") or "g++"


def _cpu_flags() -> str:
    return " ".join(sorted(cpu_flags()))


def _command(source: str, output: str) -> list[str]:
    import tensorflow as tf

    return [
        compiler(),
        "-std=c++17",
        "-shared",
        "-fPIC",
        *OPTIMIZE,
        "-w",  # TensorFlow's headers warn by the hundred; errors still show
        source,
        "-o",
        output,
        *tf.sysconfig.get_compile_flags(),
        *tf.sysconfig.get_link_flags(),
    ]


def library_path() -> str:
    """Where this machine's build of the kernels lives (built or not)."""
    import tensorflow as tf

    with open(SOURCE, "rb") as f:
        source = f.read()
    key = hashlib.sha256()
    for part in (
        source,
        tf.__version__.encode(),
        " ".join(_command("SRC", "OUT")).encode(),
        platform.machine().encode(),
        _cpu_flags().encode(),
    ):
        key.update(part)
        key.update(b"\0")
    return os.path.join(cache_dir(), f"albert_fused_ops_{key.hexdigest()[:16]}.so")


def build(timeout: float = 600.0) -> str:
    """Compiles the kernels unless already cached; returns the library's path.

    Raises:
        KernelBuildError: no compiler, or it failed (its output is included).
    """
    path = library_path()
    if os.path.exists(path):
        return path
    cxx = compiler()
    if shutil.which(cxx) is None:
        raise KernelBuildError(
            f"no C++ compiler {cxx!r} on PATH to build albert_tf's fused kernels; "
            "install one (Debian: apt-get install g++) or set CXX."
        )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    print(
        "albert_tf: compiling the fused CPU kernels (once per machine and TensorFlow "
        f"version, ~15 s) into {os.path.dirname(path)}",
        file=sys.stderr,
        flush=True,
    )
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        result = subprocess.run(
            _command(SOURCE, tmp), capture_output=True, text=True, timeout=timeout
        )
        if result.returncode != 0:
            tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-20:])
            raise KernelBuildError(f"compiling {SOURCE} failed ({cxx}):\n{tail}")
        os.replace(tmp, path)
    except subprocess.TimeoutExpired as e:
        raise KernelBuildError(f"compiling {SOURCE} took over {timeout:.0f} s") from e
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path
