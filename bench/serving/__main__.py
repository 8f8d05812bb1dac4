"""Multiple-choice inference latency: exported SavedModel vs bare encoder vs Hugging Face.

One ALBERT-base-shaped multiple-choice model (V=30000, E=128, H=768, 12 shared
layers, 12 heads, FFN 3072, random weights, LayerNorm weights spread as trained
ones are: `trained_like_layer_norms`) with an English SentencePiece tokenizer
trained here on the in-repo sample, exported with the package's exporter
(`albert_tf.serving.export_saved_model`, default limits: max_seq_length 512,
max_qa_length 128, batches packed to their longest option). Workloads: real
parable_en items (a ~100-150-word story, a 8-word question, 4 options of <= 12
words), one item (batch 1) and 32 items (batch 32). Variants, each timed in its
own fresh process:

* ``savedmodel``: `tf.saved_model.load` + the ``serving_default`` signature on
  raw strings (in-graph tokenisation and packing, forward, softmax); the
  worker imports only tensorflow and tensorflow_text, as a server would;
* ``savedmodel_bf16`` / ``savedmodel_int8``: the same export in the other
  serving precisions; ``not_shared*``: the BERT-base-shaped twin (same FLOPs,
  a weight set per layer) in each;
* ``savedmodel_score_ids`` / ``savedmodel_tokenize``: the SavedModel's other
  two signatures (forward on packed ids; tokenisation alone), which split the
  ``serving_default`` time into its two halves;
* ``bare_encoder``: the Keras `AlbertMultipleChoice` (same checkpoint) in a
  `tf.function` on the already packed int32 ids of the same [B, 4, S] shape;
* ``hf``: transformers' `AlbertTokenizerFast` (built offline from the same
  ``spiece.model``) + `AlbertForMultipleChoice` loaded from our model exported to
  Hugging Face's layout (``convert --target=hf``: the same weights; eval mode,
  `torch.inference_mode`, SDPA attention); tokeniser and model times are also
  reported apart, and the slow `AlbertTokenizer` is timed too;
* ``litert_fp32`` / ``litert_int8``: the LiteRT export (XNNPACK, one item per
  call, sequences padded to the workloads' longest);
* ``ort_*``: that same Hugging Face model through ``torch.onnx`` into ONNX Runtime
  (plain and optimised, float32 and int8). The export records how far its float32
  logits are from our Keras model's on the batch-1 workload.

Writes ``bench/results/serving.json`` and prints a markdown table::

    python -m bench.serving                          # everything (~10-15 min, 2 cores)
    python -m bench.serving --smoke                  # tiny model, checks the plumbing
    python -m bench.serving --workloads=batch1 --repeats=3
    python -m bench.serving --variants=savedmodel,hf --workdir=/tmp/srv  # keeps/reuses the export
    python -m bench.serving --tasks=span_qa,tagging,classification   # the other tasks:
                                                      # bench.serving.tasks.benchmark

Ratios (medians, same run): ``savedmodel / bare_encoder`` (the serving
wrapper's overhead; target <= 1.3 at batch 1) and ``hf / savedmodel``
(target >= 2: above 1 means the SavedModel is faster).

This module is the runner (prepare in a worker, one worker per variant and
workload, the report); the parts: `bench.serving.workload` (variants, workloads,
the work directory), `bench.serving.prepare` (tokenizer, models, exports),
`bench.serving.ours` (SavedModel, bare encoder, LiteRT), `bench.serving.peers`
(Hugging Face, ONNX Runtime) and `bench.serving.report` (ratios, the table).
"""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any

from bench import common
from bench.common import Job, Steps
from bench.serving import ours, peers
from bench.serving.prepare import prepare
from bench.serving.report import markdown, summarize
from bench.serving.workdir import prepared_steps
from bench.serving.workload import LITERT, ORT, ORT_BUCKETED, SAVEDMODELS, VARIANTS, WORKLOADS

SIGNATURES = {"savedmodel_score_ids": "score_ids", "savedmodel_tokenize": "tokenize"}


class Serving(common.Benchmark):
    name = "serving"
    what = (
        "latency of one multiple-choice request (4 options per item): our "
        "raw-text SavedModel in float32/bfloat16/int8 (and its BERT-base-shaped not-shared "
        "twin), the bare Keras model, LiteRT, ONNX Runtime (plain/optimised, float32/int8) "
        "and Hugging Face PyTorch"
    )
    variants = VARIANTS

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--workloads", default=",".join(WORKLOADS))
        parser.add_argument("--repeats", type=int, default=None, help="timed calls, batch 1 (20)")
        parser.add_argument("--warmup", type=int, default=None, help="untimed calls, batch 1 (3)")
        parser.add_argument(
            "--large_repeats", type=int, default=None, help="timed calls, batch 32 (3: ~1 min each)"
        )
        parser.add_argument("--large_warmup", type=int, default=None, help="untimed, batch 32 (1)")
        parser.add_argument(
            "--workdir", default=None, help="keep/reuse tokenizer, model and export here"
        )
        parser.add_argument("--keep_workdir", action="store_true", help="keep the temp workdir")
        parser.add_argument(
            "--hf_attention",
            default="sdpa",
            choices=("sdpa", "eager"),
            help="transformers attention implementation (sdpa: fused kernel, faster on CPU)",
        )

    def configure(self, args: argparse.Namespace) -> None:
        args.workloads = common.choices(args.workloads, tuple(WORKLOADS), "workload")
        if args.repeats is None:
            args.repeats = 2 if args.smoke else 20
        if args.warmup is None:
            args.warmup = 1 if args.smoke else 3
        if args.large_repeats is None:
            args.large_repeats = 2 if args.smoke else 3
        if args.large_warmup is None:
            args.large_warmup = 1
        self.own_workdir = args.workdir is None and not args.keep_workdir

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"results": {w: {} for w in args.workloads}, "ratios": {}}

    def prepare(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        return prepared_steps(
            args,
            report,
            prefix="albert_serving_",
            labels=("prepare tokenizer, model, export", "prepare_onnx export, optimise, quantise"),
            wants_onnx=bool(set(args.variants) & {*ORT, *ORT_BUCKETED}),
        )

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for workload in args.workloads:
            if WORKLOADS[workload] == 1:
                params = {"warmup": args.warmup, "repeats": args.repeats}
            else:
                params = {"warmup": args.large_warmup, "repeats": args.large_repeats}
            for v in args.variants:
                job = Job(v, {"workload": workload, **params}, f"{v} {workload}")
                report["results"][workload][v] = yield job

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        variant = job.variant
        if variant == "prepare":
            common.pin_threads(args, "tf")
            return prepare(args)
        if variant in ("hf", "prepare_onnx", *ORT, *ORT_BUCKETED):
            os.environ["USE_TF"] = "0"  # transformers must not pull TensorFlow in
            common.pin_threads(args, "torch")
            if variant == "prepare_onnx":
                return peers.prepare_onnx(args)
            if variant in ORT:
                return peers.measure_ort(args, ORT[variant])
            if variant in ORT_BUCKETED:
                return peers.measure_ort(args, ORT_BUCKETED[variant], bucketed=True)
            return peers.measure_hf(args)
        common.pin_threads(args, "tf")
        if variant == "bare_encoder":
            return ours.measure_bare_encoder(args)
        if variant in LITERT:
            return ours.measure_litert(args, LITERT[variant])
        if variant in SAVEDMODELS:
            return ours.measure_savedmodel(args, "serving_default", variant)
        return ours.measure_savedmodel(args, SIGNATURES[variant])

    def summarize(self, report: dict[str, Any]) -> None:
        summarize(report)

    def table(self, report: dict[str, Any]) -> str:
        return markdown(report)

    def cleanup(self, args: argparse.Namespace) -> None:
        if self.own_workdir and args.workdir:
            shutil.rmtree(args.workdir, ignore_errors=True)


def tasks_requested(argv: list[str]) -> list[str]:
    """``--tasks`` of the command line (multiple choice when absent).

    >>> tasks_requested(["--tasks=span_qa,tagging", "--smoke"])
    ['span_qa', 'tagging']
    >>> tasks_requested(["--tasks", "classification"]), tasks_requested([])
    (['classification'], ['multiple_choice'])
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--tasks", default="multiple_choice")
    given = parser.parse_known_args(argv)[0].tasks
    return [t.strip() for t in given.split(",") if t.strip()]


if __name__ == "__main__":
    import sys

    tasks = tasks_requested(sys.argv[1:])
    if tasks == ["multiple_choice"]:
        common.main(Serving(), [a for a in sys.argv[1:] if not a.startswith("--tasks")])
    elif "multiple_choice" in tasks:
        raise SystemExit(
            "--tasks: multiple choice is its own run (python -m bench.serving, no --tasks); "
            "the other tasks run together"
        )
    else:
        # Span QA, tagging, classification: bench.serving.tasks (its workers, too).
        from bench.serving.tasks.benchmark import ServingTasks

        common.main(ServingTasks())
