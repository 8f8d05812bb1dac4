"""The serving benchmarks' work directory (``--workdir``): what ``prepare`` and
``prepare_onnx`` leave there, reused by a later run given the same folder."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Any

from bench.common import Job, Steps

#: Files of the work directory.
PREPARED = "prepare.json"
ONNX_INFO = "onnx.json"


def prepared_steps(
    args: argparse.Namespace,
    report: dict[str, Any],
    *,
    prefix: str,
    labels: tuple[str, str],
    wants_onnx: bool,
) -> Steps:
    """The ``prepare`` job, and the ``prepare_onnx`` job when ``wants_onnx``, each
    skipped when ``args.workdir`` (unset: a new temporary folder whose name starts
    with ``prefix``) holds its result; their results go to ``report["prepared"]`` and
    ``report["onnx"]``. A failed ``prepare`` stops the run; a failed ONNX
    preparation is reported and not kept, so the next run tries it again."""
    args.workdir = args.workdir or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(args.workdir, exist_ok=True)
    prepared = os.path.join(args.workdir, PREPARED)
    if os.path.exists(prepared):  # --workdir of an earlier run: reuse what it made
        with open(prepared) as f:
            report["prepared"] = json.load(f)
    else:
        report["prepared"] = yield Job("prepare", label=labels[0])
        if "error" in report["prepared"]:
            raise SystemExit(f"prepare failed: {report['prepared']['error']}")
    onnx_info = os.path.join(args.workdir, ONNX_INFO)
    if wants_onnx and not os.path.exists(onnx_info):
        onnx = yield Job("prepare_onnx", label=labels[1])
        if "error" not in onnx:
            with open(onnx_info, "w") as f:
                json.dump(onnx, f, indent=2)
        report["onnx"] = onnx
    elif os.path.exists(onnx_info):
        with open(onnx_info) as f:
            report["onnx"] = json.load(f)
