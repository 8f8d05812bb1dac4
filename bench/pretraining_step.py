"""One ALBERT pretraining step (MLM + SOP) at ALBERT-base shape: ours vs peers.

Times a full training step (forward, backward, optimizer update) of this
package's `PretrainingTrainer` and of Keras-Hub and Hugging Face (PyTorch)
ALBERT models on one fixed synthetic batch, in fp32 and bf16, and this
machine's peak matmul throughput (for MFU). Every measurement runs in its own
fresh process, one at a time, with the same thread settings. Writes
``bench/results/pretraining_step.json`` and prints a markdown table::

    python bench/pretraining_step.py                     # everything (~30 min, 2 cores)
    python bench/pretraining_step.py --smoke             # tiny shapes, checks the plumbing
    python bench/pretraining_step.py --variants=ours,hf_eager --precisions=float32 --repeats=3

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

This file is the runner (one worker process per measurement, rounds, the
report file). The parts: ``step_workload.py`` (variants, shapes, FLOPs, the
shared batch), ``step_ours.py`` (our trainer's step), ``step_peers.py``
(Keras-Hub, Hugging Face), ``matmul_peak.py`` (MFU's denominator) and
``step_report.py`` (rounds merged, ratios, the table).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # imported from elsewhere (python puts bench/ first for scripts)
    sys.path.insert(0, HERE)

import common  # noqa: E402
from common import (  # noqa: E402
    machine_info,
    pin_tf_threads,
    pin_torch_threads,
    thread_env,
    thread_report,
    time_step,
)
from matmul_peak import measure_matmul  # noqa: E402
from step_ours import build_ours_step  # noqa: E402
from step_peers import build_hf_step, build_keras_hub_step  # noqa: E402
from step_report import markdown, merge_rounds, summarize  # noqa: E402
from step_workload import (  # noqa: E402
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


# --------------------------------------------------------------------------- worker
def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    os.environ.update(thread_env(cores, args.inter_op_threads, args.omp_wait_policy))
    shape = SMOKE if args.smoke else FULL
    name, precision = args.worker, args.precision
    if name.startswith("matmul_"):
        framework = name.removeprefix("matmul_")
        (pin_tf_threads if framework == "tf" else pin_torch_threads)(cores, args.inter_op_threads)
        return measure_matmul(framework, precision, args.smoke)
    warmup = args.warmup
    with tempfile.TemporaryDirectory() as workdir:
        if name in OWN:
            pin_tf_threads(cores, args.inter_op_threads)
            fused = name == "ours"
            step, info = build_ours_step(shape, precision, workdir, fused_kernels=fused)
        elif name in ("keras_hub", "keras_hub_xla"):
            pin_tf_threads(cores, args.inter_op_threads)
            jit = name == "keras_hub_xla"
            step, info = build_keras_hub_step(shape, precision, jit_compile=jit)
            warmup += EXTRA_COMPILE_WARMUP if jit else 0
        elif name in ("hf_eager", "hf_compile"):
            pin_torch_threads(cores, args.inter_op_threads)
            compiled = name == "hf_compile"
            step, info = build_hf_step(shape, precision, compiled, args.hf_attention)
            warmup += EXTRA_COMPILE_WARMUP if compiled else 0
        else:
            raise ValueError(f"unknown worker {name!r}")
        timing = time_step(step, max(warmup, 1), args.repeats)
    return {**timing, **info, "peak_rss_mb": common.peak_rss_mb()}


def worker_main(args: argparse.Namespace) -> None:
    common.worker_main(lambda: run_worker(args))


# --------------------------------------------------------------------------- orchestrator
def spawn(worker: str, precision: str, args: argparse.Namespace) -> dict[str, Any]:
    """Runs one measurement in a fresh process; never raises."""
    return common.spawn(
        __file__,
        [
            "--worker",
            worker,
            "--precision",
            precision,
            "--repeats",
            str(args.repeats),
            "--warmup",
            str(args.warmup),
            "--hf_attention",
            args.hf_attention,
        ],
        args,
    )


def orchestrate(args: argparse.Namespace) -> None:
    variants = common.choices(args.variants, VARIANTS, "variant")
    precisions = common.choices(args.precisions, PRECISIONS, "precision")
    shape = SMOKE if args.smoke else FULL
    # bench/results/pretraining_step.json; smoke runs go to the temp dir.
    output = common.output_path(args, "pretraining_step")
    report: dict[str, Any] = {
        "what": "seconds per ALBERT pretraining step (MLM at masked positions + SOP, "
        "forward + backward + optimizer), one fixed synthetic batch, input pipeline excluded",
        "command": [os.path.relpath(__file__), *sys.argv[1:]],
        "smoke": args.smoke,
        "shape": dataclasses.asdict(shape),
        "flops_per_step": albert_training_flops(**flops_args(shape)),
        "forward_flops_by_part": albert_forward_flops(**flops_args(shape)),
        "machine": machine_info(),
        "threads": thread_report(args),
        "peak": {},
        "results": {p: {} for p in precisions},
        "ratios_over_ours": {},
    }

    def save() -> None:
        summarize(report)
        common.write_report(report, output)

    if "matmul_peak" in variants:
        for fw in ("tf", "torch"):
            report["peak"][fw] = {}
            for p in precisions:
                print(f"[matmul_peak] {fw} {p} ...", file=sys.stderr, flush=True)
                report["peak"][fw][p] = spawn(f"matmul_{fw}", p, args)
        for p, key in (("float32", "peak_fp32"), ("bfloat16", "peak_bf16")):
            best = [
                r.get("best_gflops")
                for r in (report["peak"][fw].get(p, {}) for fw in ("tf", "torch"))
            ]
            best = [b for b in best if b]
            report["peak"][key] = max(best) if best else None
        save()
    # Rounds interleave the variants, so slow spells of the host (seen here as
    # bimodal step times inside one process) fall on every variant alike.
    for round_index in range(args.rounds):
        for p in precisions:
            for v in variants:
                if v == "matmul_peak":
                    continue
                print(f"[{v}] {p} round {round_index + 1} ...", file=sys.stderr, flush=True)
                r = spawn(v, p, args)
                results = report["results"][p]
                results[v] = merge_rounds(results.get(v), r)
                print(
                    f"[{v}] {p}: "
                    + (f"{r['median_s']:.3f} s/step" if "median_s" in r else r["error"]),
                    file=sys.stderr,
                    flush=True,
                )
                save()
    summarize(report)
    common.publish(report, output, markdown(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed steps per round (6; smoke 2)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="times every variant is run, interleaved; steps are pooled (2; smoke 1)",
    )
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (3; smoke 1)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    common.add_common_flags(parser)  # --output, --smoke, threads, --timeout, --worker
    parser.add_argument(
        "--hf_attention",
        default="sdpa",
        choices=("sdpa", "eager"),
        help="transformers attention implementation (sdpa: fused kernel, faster on CPU)",
    )
    parser.add_argument("--precision", default="float32", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = 2 if args.smoke else 6
    if args.rounds is None:
        args.rounds = 1 if args.smoke else 2
    if args.warmup is None:
        args.warmup = 1 if args.smoke else 3
    if args.worker:
        worker_main(args)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
