"""Where the time of one of our pretraining steps goes, op by op.

Builds the same step as ``bench.pretraining_step``'s ``ours`` variant (the real
`PretrainingTrainer` step at ALBERT-base shape), traces a few steps with the
TensorFlow profiler and sums the executor's op times from the trace
(``.xplane.pb``) by op type and by op name. Prints the tables and writes them
to ``bench/results/profile_step_<precision>.json``; the raw trace stays under
``--logdir`` for TensorBoard's trace viewer::

    python -m bench.profile_step                          # bf16, 3 traced steps
    python -m bench.profile_step --precision=float32 --top=40
    python -m bench.profile_step --smoke                  # tiny shapes, output in /tmp

Op times are summed over every executor thread, so with two intra-op threads
an op's time is wall time, not CPU time (an op holds the executor until its
parallel work finishes). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import tempfile
import time
from typing import Any

from bench import common
from bench.common import Job, Steps
from bench.step_ours import build_ours_step
from bench.step_workload import FULL, SMOKE


def op_times(logdir: str) -> tuple[dict[str, float], dict[tuple[str, str], float], int]:
    """Sums TF op durations (µs) in the newest trace: by type and by (name, type)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
    if not paths:
        raise FileNotFoundError(f"no .xplane.pb under {logdir}: did the profiler run?")
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        space.ParseFromString(f.read())
    by_type: dict[str, float] = collections.Counter()
    by_name: dict[tuple[str, str], float] = collections.Counter()
    events = 0
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                meta = plane.event_metadata[event.metadata_id]
                # Executor op events are named "<op name>:<op type>".
                if "::" in meta.name:  # executor bookkeeping, e.g. "ExecutorState::Process"
                    continue
                name, _, op_type = meta.name.rpartition(":")
                if not name or not op_type or "/" in op_type or " " in op_type:
                    continue
                if any(stat_names.get(s.metadata_id) == "step_num" for s in event.stats):
                    continue
                by_type[op_type] += event.duration_ps / 1e6
                by_name[(name, op_type)] += event.duration_ps / 1e6
                events += 1
    return dict(by_type), dict(by_name), events


class ProfileStep(common.Benchmark):
    name = "profile_step"
    what = "TF profiler op times of our pretraining step (bench.pretraining_step's ours)"
    isolated = False  # one step profiled in this process; threads pinned first

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--precision", default="bfloat16", choices=("float32", "bfloat16"))
        parser.add_argument("--steps", type=int, default=3, help="traced steps")
        parser.add_argument("--warmup", type=int, default=3)
        parser.add_argument("--top", type=int, default=25, help="rows of each table")
        parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
        parser.add_argument("--logdir", default=None, help="trace directory (default: a temp dir)")

    def configure(self, args: argparse.Namespace) -> None:
        # Thread settings must be in the environment before TensorFlow loads.
        os.environ.update(common.thread_env(args.cores, 1, "default"))
        self.top = args.top

    def result_name(self, args: argparse.Namespace, report: dict[str, Any]) -> str:
        return f"profile_step_{args.precision}"

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        report.update((yield Job(args.precision)))

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        common.pin_tf_threads(args.cores, 1)
        import tensorflow as tf

        shape = SMOKE if args.smoke else FULL
        workdir = tempfile.mkdtemp(prefix="albert_profile_")
        logdir = args.logdir or os.path.join(workdir, "trace")
        step, _ = build_ours_step(shape, args.precision, workdir)
        for _ in range(args.warmup):
            step()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        untraced = (time.perf_counter() - start) / args.steps

        tf.profiler.experimental.start(logdir)
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        traced = (time.perf_counter() - start) / args.steps
        tf.profiler.experimental.stop()

        by_type, by_name, events = op_times(logdir)
        per_step = {k: v / args.steps / 1e3 for k, v in by_type.items()}  # ms
        names = {f"{n} ({t})": v / args.steps / 1e3 for (n, t), v in by_name.items()}
        top = sorted(names.items(), key=lambda kv: -kv[1])[: args.top * 4]
        return {
            "precision": args.precision,
            "shape": "smoke" if args.smoke else "albert_base",
            "step_s_untraced": round(untraced, 4),
            "step_s_traced": round(traced, 4),
            "op_ms_per_step": round(sum(per_step.values()), 1),
            "events": events,
            "by_type_ms": {
                k: round(v, 2) for k, v in sorted(per_step.items(), key=lambda kv: -kv[1])
            },
            "top_ops_ms": {k: round(v, 2) for k, v in top},
            "trace_dir": logdir,
        }

    def table(self, report: dict[str, Any]) -> str:
        top = self.top
        lines = [
            f"{report['precision']}: step {report['step_s_untraced']:.3f} s "
            f"({report['step_s_traced']:.3f} s traced); "
            f"op time {report['op_ms_per_step']:.0f} ms per step",
            "\n| op type | ms per step |\n|---|---|",
        ]
        lines += [f"| {k} | {v:.1f} |" for k, v in list(report["by_type_ms"].items())[:top]]
        lines.append("\n| op | ms per step |\n|---|---|")
        lines += [f"| {k} | {v:.1f} |" for k, v in list(report["top_ops_ms"].items())[:top]]
        lines.append(f"\ntrace in {report['trace_dir']}")
        return "\n".join(lines)


if __name__ == "__main__":
    common.main(ProfileStep())
