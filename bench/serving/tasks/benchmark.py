"""Serving speed of span QA, tagging and classification: our raw-text SavedModel
against Hugging Face pipelines and ONNX Runtime, on the same weights.

    python -m bench.serving --tasks=span_qa,tagging,classification   # ~15-25 min, 2 cores
    python -m bench.serving --tasks=classification --smoke           # the plumbing, ~1-2 min
    python -m bench.serving --tasks=span_qa --variants=savedmodel,hf --workdir=/tmp/srv

Each task starts from its shipped model (``models/exported``): the checkpoint is
recovered from the export (`albert_tf.serving.recovery`), written in Hugging Face's
layout (``convert --target=hf``) for the peers and exported again in every variant,
so that every variant runs the same weights. The shipped tagger's BiLSTM + CRF head
has no Hugging Face form: tagging runs a dense head tuned briefly on its encoder
(`bench.serving.tasks.prepare.dense_tagger`). Workloads:

* span QA: one question over a PubMed-like abstract of ~420 pieces (8 windows of the
  model's 128, 48 pieces apart), and 32 such requests (`bench.serving.tasks.items`);
* tagging: a People's Daily-like paragraph (one window), a text three windows long;
* classification: one review, 32 reviews.

Variants (`bench.serving.tasks.workload`), each in its own fresh process:

* ``savedmodel``, ``savedmodel_bf16``, ``savedmodel_int8``: the export in each serving
  precision, loaded with only ``tensorflow`` + ``tensorflow_text``, raw strings in;
* ``savedmodel_xla``, ``savedmodel_xla_bf16``: ``export --jit_compile``;
* ``hf``: the task's transformers pipeline (PyTorch, SDPA attention);
* ``ort_opt_fp32``, ``ort_opt_int8``: ONNX Runtime inside the same pipeline (needs
  ``pip install .[bench]``).

Reports median and p90 latency, requests/s, peak RSS of the worker and how many
answers equal ``savedmodel``'s (spans, entities, labels) in
``bench/results/serving_tasks.json``. Multiple choice stays ``python -m bench.serving``
without ``--tasks`` (`bench.serving.__main__`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from bench import common
from bench.common import Job, Steps
from bench.serving.tasks.report import markdown, summarize
from bench.serving.tasks.workload import ORT, SAVEDMODELS, SMOKE_VARIANTS, TASKS, VARIANTS
from bench.serving.workdir import prepared_steps


class ServingTasks(common.Benchmark):
    name = "serving_tasks"
    what = (
        "latency of span QA, tagging and classification requests: our raw-text SavedModel "
        "(float32/bfloat16/int8, XLA-compiled float32/bfloat16) against the Hugging Face "
        "pipeline and ONNX Runtime (optimised float32/int8) in it, on the same weights, with "
        "the answers compared"
    )
    variants = VARIANTS
    smoke_variants = SMOKE_VARIANTS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--tasks", default=",".join(TASKS), help="of: " + ", ".join(TASKS))
        parser.add_argument("--repeats", type=int, default=None, help="timed calls, 1 request (30)")
        parser.add_argument("--warmup", type=int, default=None, help="untimed calls first (3)")
        parser.add_argument(
            "--large_repeats", type=int, default=None, help="timed calls, 32 requests (10)"
        )
        parser.add_argument("--workdir", default=None, help="keep/reuse the models here")
        parser.add_argument("--keep_workdir", action="store_true", help="keep the temp workdir")
        parser.add_argument(
            "--tagger_steps", type=int, default=150, help="steps of the dense tagger head"
        )
        parser.add_argument(
            "--hf_batch_size", type=int, default=32, help="the pipelines' batch_size (windows)"
        )
        parser.add_argument("--hf_attention", default="sdpa", choices=("sdpa", "eager"))

    def configure(self, args: argparse.Namespace) -> None:
        args.tasks = common.choices(args.tasks, tuple(TASKS), "task")
        if args.repeats is None:
            args.repeats = 3 if args.smoke else 30
        if args.warmup is None:
            args.warmup = 1 if args.smoke else 3
        if args.large_repeats is None:
            args.large_repeats = 2 if args.smoke else 10
        self.own_workdir = args.workdir is None and not args.keep_workdir

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        # The command as typed (`python -m bench.serving --tasks=...`), not this module's.
        argv = [a for a in sys.argv[1:] if not a.startswith("--worker")]
        return {
            "command": ["python", "-m", "bench.serving", *argv],
            "results": {t: {w: {} for w in TASKS[t].workloads} for t in args.tasks},
            "summary": {},
        }

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        return prepared_steps(
            args,
            report,
            prefix="albert_serving_tasks_",
            labels=("prepare: recover, tune, export", "prepare_onnx: export, optimise, quantise"),
            wants_onnx=bool(set(args.variants) & set(ORT)),
        )

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        onnx_error = report.get("onnx", {}).get("error")
        for task in args.tasks:
            for workload, count in TASKS[task].workloads.items():
                repeats = args.repeats if count == 1 else args.large_repeats
                params = {"task": task, "workload": workload, "warmup": args.warmup}
                params["repeats"] = repeats
                for v in args.variants:
                    if v in ORT and onnx_error:  # nothing to time: say why
                        result = {"error": f"prepare_onnx failed: {onnx_error}"}
                        report["results"][task][workload][v] = result
                        continue
                    job = Job(v, params, f"{task} {workload} {v}")
                    report["results"][task][workload][v] = yield job

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        variant = job.variant
        if variant == "prepare":
            common.pin_threads(args, "tf")
            from bench.serving.tasks.prepare import prepare

            return prepare(args)
        if variant in SAVEDMODELS:
            common.pin_threads(args, "tf")
            from bench.serving.tasks.ours import measure_savedmodel

            return measure_savedmodel(args, variant)
        os.environ["USE_TF"] = "0"  # transformers must not pull TensorFlow in
        common.pin_threads(args, "torch")
        from bench.serving.tasks import peers

        if variant == "prepare_onnx":
            return peers.prepare_onnx(args)
        if variant in ORT:
            return peers.measure_ort(args, ORT[variant])
        return peers.measure_hf(args)

    def summarize(self, report: dict[str, Any]) -> None:
        summarize(report)

    def table(self, report: dict[str, Any]) -> str:
        return markdown(report)

    def cleanup(self, args: argparse.Namespace) -> None:
        if self.own_workdir and args.workdir:
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    common.main(ServingTasks())
