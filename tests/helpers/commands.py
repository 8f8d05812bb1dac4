"""A package command run as a user runs it: ``python -m albert_tf.<name>`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

#: TensorFlow's C++ start-up lines off, and no GPU looked for: what the command tests set.
QUIET_CPU_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def run_command(
    name: str,
    *args: object,
    cwd: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """Runs ``python -m albert_tf.<name> ARGS`` (each argument through ``str``) and
    returns it finished, stdout and stderr captured as text. ``env`` adds to this
    process's environment."""
    return subprocess.run(
        [sys.executable, "-m", f"albert_tf.{name}", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **env} if env else None,
    )
