"""Where the time of one served answer goes, op by op, in each serving precision.

Loads the SavedModels that ``python -m bench.serving --workdir=DIR`` exported (ALBERT-base
shape, float32 / bfloat16 / int8), answers the batch-1 workload (one
parable_en item, 4 options of ~250 pieces) under the TensorFlow profiler and
sums the executor's op times by op type (`bench.profile_step.op_times`). Prints
one table per precision (the variants, ``--variants``), each profiled in a fresh
process, and writes ``bench/results/profile_serving.json``::

    python -m bench.serving --workdir=/tmp/srv --variants=savedmodel --workloads=batch1
    python -m bench.profile_serving --workdir=/tmp/srv

Op times are summed over executor threads: with two intra-op threads an op's
time is its wall time. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from bench import common
from bench.common import Job, Steps
from bench.profile_step import op_times
from bench.serving.workload import WORKLOADS_FILE, prepared

VARIANTS = {"float32": "savedmodel", "bfloat16": "savedmodel_bf16", "int8": "savedmodel_int8"}


def profile(path: str, texts: dict, calls: int, warmup: int) -> dict:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    serve = tf.saved_model.load(path).signatures["serving_default"]

    def call() -> None:
        out = serve(
            context=tf.constant(texts["context"]),
            question=tf.constant(texts["question"]),
            options=tf.constant(texts["options"]),
        )
        out["logits"].numpy()

    for _ in range(warmup):
        call()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    untraced = (time.perf_counter() - start) / calls
    logdir = tempfile.mkdtemp(prefix="albert_profile_serving_")
    tf.profiler.experimental.start(logdir)
    for _ in range(calls):
        call()
    tf.profiler.experimental.stop()
    by_type, _, events = op_times(logdir)
    per_call = {k: v / calls / 1e3 for k, v in by_type.items()}  # ms
    return {
        "call_ms_untraced": round(untraced * 1e3, 1),
        "op_ms_per_call": round(sum(per_call.values()), 1),
        "events": events,
        "by_type_ms": {k: round(v, 2) for k, v in sorted(per_call.items(), key=lambda kv: -kv[1])},
    }


class ProfileServing(common.Benchmark):
    name = "profile_serving"
    what = "TF profiler op times of one served batch-1 answer, per serving precision"
    variants = tuple(VARIANTS)

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--workdir", required=True, help="bench.serving's --workdir")
        parser.add_argument("--calls", type=int, default=None, help="profiled calls (5; smoke 1)")
        parser.add_argument("--warmup", type=int, default=None, help="untimed calls (3; smoke 1)")
        parser.add_argument("--top", type=int, default=12, help="rows of each table")

    def configure(self, args: argparse.Namespace) -> None:
        args.calls = args.calls or (1 if args.smoke else 5)
        args.warmup = args.warmup or (1 if args.smoke else 3)
        self.top = args.top

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"workload": "batch1", "precisions": {}}

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for precision in args.variants:
            report["precisions"][precision] = yield Job(precision)

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        common.pin_threads(args, "tf")
        path = prepared(args.workdir)["saved_models"][VARIANTS[job.variant]]
        with open(os.path.join(args.workdir, WORKLOADS_FILE), encoding="utf-8") as f:
            texts = json.load(f)["batch1"]
        return profile(path, texts, args.calls, args.warmup)

    def table(self, report: dict[str, Any]) -> str:
        lines = []
        for precision, out in report["precisions"].items():
            if "error" in out:
                lines.append(f"{precision}: {out['error']}")
                continue
            lines += [
                f"\n{precision}: {out['call_ms_untraced']} ms per answer, "
                f"op time {out['op_ms_per_call']} ms",
                "| op type | ms | share |\n|---|---|---|",
            ]
            for op, ms in list(out["by_type_ms"].items())[: self.top]:
                lines.append(f"| {op} | {ms:.1f} | {ms / out['op_ms_per_call']:.0%} |")
        return "\n".join(lines)


if __name__ == "__main__":
    common.main(ProfileServing())
