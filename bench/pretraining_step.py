"""One ALBERT pretraining step (MLM + SOP) at ALBERT-base shape: ours vs peers.

Times a full training step (forward, backward, optimizer update) of this
package's `PretrainingTrainer` and of Keras-Hub and Hugging Face (PyTorch)
ALBERT models on one fixed synthetic batch, in fp32 and bf16, and this
machine's peak matmul throughput (for MFU). Every measurement runs in its own
fresh process, one at a time, with the same thread settings. Writes
``bench/results/pretraining_step.json`` and prints a markdown table::

    python -m bench.pretraining_step                     # everything (~30 min, 2 cores)
    python -m bench.pretraining_step --smoke             # tiny shapes, checks the plumbing
    python -m bench.pretraining_step --variants=ours,hf_eager --precisions=float32 --repeats=3

Variants: ``matmul_peak`` (TF and torch matmul GFLOP/s), ``ours``, ``ours_unfused``,
``keras_hub``, ``keras_hub_xla``, ``hf_eager``, ``hf_compile``. Shape: V=30000,
E=128, H=768, 12 shared layers, 12 heads, FFN 3072, gelu_new, no dropout;
batch 16 × 128 tokens, MLM decoded at 20 masked positions per example.
``--smoke`` writes to the temp directory unless ``--output`` is given, so it
never replaces real figures.

MFU = model FLOPs (`albert_training_flops`) / median step time / the best
matmul GFLOP/s of either framework at that precision. ``ratios_over_ours``
is each peer's median step time over ours: above 1 means ours is faster.
Run it on an otherwise idle machine; the ``other CPU`` column (share of the
CPUs other processes used while timing) shows when that was not so.

This module declares the benchmark (its jobs: the matmul peaks, then every
variant in interleaved rounds; `bench.common.main` runs each in a fresh
process and writes the report). The parts: ``step_workload`` (variants, shapes,
FLOPs, the shared batch), ``step_ours`` (our trainer's step), ``step_peers``
(Keras-Hub, Hugging Face), ``matmul_peak`` (MFU's denominator) and
``step_report`` (rounds merged, ratios, the table).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from typing import Any

from bench import common
from bench.common import Job, Steps
from bench.matmul_peak import measure_matmul
from bench.step_ours import build_ours_step
from bench.step_peers import build_hf_step, build_keras_hub_step
from bench.step_report import markdown, merge_rounds, summarize
from bench.step_workload import (
    FULL,
    OWN,
    PRECISIONS,
    SMOKE,
    VARIANTS,
    albert_forward_flops,
    albert_training_flops,
    flops_args,
)

# Variants whose first calls compile (XLA, Inductor) get this many extra warm-ups.
EXTRA_COMPILE_WARMUP = 2
PEAK_KEYS = {"float32": "peak_fp32", "bfloat16": "peak_bf16"}


class PretrainingStep(common.Benchmark):
    name = "pretraining_step"
    what = (
        "seconds per ALBERT pretraining step (MLM at masked positions + SOP, "
        "forward + backward + optimizer), one fixed synthetic batch, input pipeline excluded"
    )
    variants = VARIANTS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--repeats", type=int, default=None, help="timed steps per round (6; smoke 2)"
        )
        parser.add_argument(
            "--rounds",
            type=int,
            default=None,
            help="times every variant is run, interleaved; steps are pooled (2; smoke 1)",
        )
        parser.add_argument(
            "--warmup", type=int, default=None, help="untimed steps first (3; smoke 1)"
        )
        parser.add_argument("--precisions", default=",".join(PRECISIONS))
        parser.add_argument(
            "--hf_attention",
            default="sdpa",
            choices=("sdpa", "eager"),
            help="transformers attention implementation (sdpa: fused kernel, faster on CPU)",
        )

    def configure(self, args: argparse.Namespace) -> None:
        args.precisions = common.choices(args.precisions, PRECISIONS, "precision")
        if args.repeats is None:
            args.repeats = 2 if args.smoke else 6
        if args.rounds is None:
            args.rounds = 1 if args.smoke else 2
        if args.warmup is None:
            args.warmup = 1 if args.smoke else 3

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        shape = SMOKE if args.smoke else FULL
        return {
            "shape": dataclasses.asdict(shape),
            "flops_per_step": albert_training_flops(**flops_args(shape)),
            "forward_flops_by_part": albert_forward_flops(**flops_args(shape)),
            "peak": {},
            "results": {p: {} for p in args.precisions},
            "ratios_over_ours": {},
        }

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        if "matmul_peak" in args.variants:
            peak = report["peak"]
            for fw in ("tf", "torch"):
                peak[fw] = {}
                for p in args.precisions:
                    params = {"framework": fw, "precision": p}
                    peak[fw][p] = yield Job("matmul_peak", params, f"matmul_peak {fw} {p}")
            for p, key in PEAK_KEYS.items():
                best = [peak[fw].get(p, {}).get("best_gflops") for fw in ("tf", "torch")]
                best = [b for b in best if b]
                peak[key] = max(best) if best else None
        # Rounds interleave the variants, so slow spells of the host (seen here as
        # bimodal step times inside one process) fall on every variant alike.
        for round_index in range(args.rounds):
            for p in args.precisions:
                for v in args.variants:
                    if v == "matmul_peak":
                        continue
                    label = f"{v} {p} round {round_index + 1}"
                    r = yield Job(v, {"precision": p}, label)
                    results = report["results"][p]
                    results[v] = merge_rounds(results.get(v), r)

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        shape = SMOKE if args.smoke else FULL
        name, precision = job.variant, args.precision
        if name == "matmul_peak":
            common.pin_threads(args, args.framework)
            return measure_matmul(args.framework, precision, args.smoke)
        warmup = args.warmup
        with tempfile.TemporaryDirectory() as workdir:
            if name in OWN:
                common.pin_threads(args, "tf")
                fused = name == "ours"
                step, info = build_ours_step(shape, precision, workdir, fused_kernels=fused)
            elif name in ("keras_hub", "keras_hub_xla"):
                common.pin_threads(args, "tf")
                jit = name == "keras_hub_xla"
                step, info = build_keras_hub_step(shape, precision, jit_compile=jit)
                warmup += EXTRA_COMPILE_WARMUP if jit else 0
            elif name in ("hf_eager", "hf_compile"):
                common.pin_threads(args, "torch")
                compiled = name == "hf_compile"
                step, info = build_hf_step(shape, precision, compiled, args.hf_attention)
                warmup += EXTRA_COMPILE_WARMUP if compiled else 0
            else:
                raise ValueError(f"unknown variant {name!r}")
            timing = common.time_step(step, max(warmup, 1), args.repeats)
        return {**timing, **info, "peak_rss_mb": common.peak_rss_mb()}

    def summarize(self, report: dict[str, Any]) -> None:
        summarize(report)

    def table(self, report: dict[str, Any]) -> str:
        return markdown(report)


if __name__ == "__main__":
    common.main(PretrainingStep())
