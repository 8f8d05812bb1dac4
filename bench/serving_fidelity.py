"""How much the lower serving precisions change the answers of models pretrained here.

For each demo model (``python -m albert_tf.demo_models``: a small ALBERT
pretrained on the shared corpora, then fine-tuned for "which option continues
the context?"):

* the fine-tuned model is exported with ``--serving_precision`` float32,
  bfloat16 and int8, and to LiteRT float32 and int8 (`albert_tf.serving.litert`,
  one item per call), and every variant answers the shared
  multiple-choice sets of its language plus the demo's held-out next-sentence
  items: **agreement** of each variant's prediction with float32's (target
  >= 99%) and each one's accuracy;
* the pretraining model scores its held-out MLM shards in float32 and with
  the projections the bfloat16 and int8 exports use
  (`albert_tf.serving.precision.load_for_serving`): **MLM
  accuracy change** (target <= 0.5 points). Keras's ``mixed_bfloat16`` policy
  (every activation in bfloat16, as bf16 training runs) is scored too, as the
  alternative the bfloat16 export did not take.

Writes ``bench/results/serving_fidelity.json`` and prints a table::

    python -m bench.serving_fidelity --runs=zh=runs/demo2/zh,en=runs/demo/en
    python -m bench.serving_fidelity --runs=zh=runs/demo_models/zh --max_items=200
    python -m bench.serving_fidelity --runs=zh=runs/demo_models/zh --smoke  # 20 items, /tmp

A run directory is what ``demo_models`` leaves: ``finetune/best``,
``pretrain/final``, ``pretrain/data/eval_shards`` and ``data/test.jsonl``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
from typing import Any

from bench import common
from bench.common import MULTIPLE_CHOICE_DATA, Job, Steps

SHARED_SETS = {
    "zh": ("parable_zh",),
    "en": ("parable_en", "socialiqa_evals", "quartz"),
}


def _items(path: str, limit: int) -> list:
    from albert_tf.tasks.multiple_choice.data import read_multiple_choice

    items, _ = read_multiple_choice(path)
    return items[:limit] if limit else items


def _predict_saved_model(path: str, items: list, batch_size: int) -> list[int]:
    import numpy as np
    import tensorflow as tf

    serve = tf.saved_model.load(path).signatures["serving_default"]
    predictions: list[int] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        width = max(len(it.options) for it in chunk)
        options = [list(it.options) + [""] * (width - len(it.options)) for it in chunk]
        out = serve(
            context=tf.constant([it.context for it in chunk]),
            question=tf.constant([it.question for it in chunk]),
            options=tf.constant(options),
        )
        predictions += np.asarray(out["prediction"]).tolist()
    return predictions


def _predict_litert(path: str, items: list) -> list[int]:
    import numpy as np

    from albert_tf.serving.litert import LiteRTMultipleChoice

    runner = LiteRTMultipleChoice(path, num_threads=os.cpu_count() or 1)
    return [
        int(np.argmax(runner.predict(it.context, it.question, list(it.options)))) for it in items
    ]


def multiple_choice_fidelity(run_dir: str, lang: str, args: argparse.Namespace) -> dict[str, Any]:
    from albert_tf.serving import export_saved_model
    from albert_tf.serving.precision import SERVING_PRECISIONS

    checkpoint = os.path.join(run_dir, "finetune", "best")
    workdir = tempfile.mkdtemp(prefix=f"fidelity_{lang}_")
    paths: dict[str, str] = {}
    for precision in SERVING_PRECISIONS:
        paths[precision] = export_saved_model(
            checkpoint, os.path.join(workdir, precision), version=1, serving_precision=precision
        )
    sets = {
        name: os.path.join(MULTIPLE_CHOICE_DATA, f"{name}.jsonl.gz") for name in SHARED_SETS[lang]
    }
    sets["held_out_next_sentence"] = os.path.join(run_dir, "data", "test.jsonl")
    items = {name: _items(path, args.max_items) for name, path in sets.items()}
    from albert_tf.serving.litert import export_litert

    # LiteRT's option count is fixed at export: the widest item of the sets.
    width = max(len(it.options) for chunk in items.values() for it in chunk)
    for precision in ("float32", "int8"):
        out = os.path.join(workdir, f"model_{precision}.tflite")
        paths[f"litert_{precision}"] = export_litert(
            checkpoint, out, precision=precision, max_options=width
        )

    results: dict[str, Any] = {}
    for set_name, chunk in items.items():
        labels = [it.label for it in chunk]
        start = time.perf_counter()
        predictions = {
            name: (
                _predict_litert(p, chunk)
                if name.startswith("litert")
                else _predict_saved_model(p, chunk, args.batch_size)
            )
            for name, p in paths.items()
        }
        reference = predictions["float32"]
        count = len(chunk)
        results[set_name] = {
            "items": count,
            "accuracy": {
                name: round(sum(p == y for p, y in zip(pred, labels, strict=True)) / count, 4)
                for name, pred in predictions.items()
            },
            "agreement_with_float32": {
                name: round(sum(a == b for a, b in zip(pred, reference, strict=True)) / count, 4)
                for name, pred in predictions.items()
                if name != "float32"
            },
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(f"[{lang}] {set_name}: {results[set_name]}", file=sys.stderr, flush=True)
    return results


def mlm_fidelity(run_dir: str, lang: str, args: argparse.Namespace) -> dict[str, Any]:
    import albert_tf
    from albert_tf.data.shards import read_metadata
    from albert_tf.serving.precision import SERVING_PRECISIONS, load_for_serving
    from albert_tf.training.evaluation import evaluate_pretraining

    model_dir = os.path.join(run_dir, "pretrain", "final")
    shards = os.path.join(run_dir, "pretrain", "data", "eval_shards")
    files = sorted(glob.glob(os.path.join(shards, "*.tfrecord*")))
    if not files:
        raise FileNotFoundError(f"no eval shards under {shards}")
    meta = read_metadata(shards) or {}
    results = {}
    for precision in (*SERVING_PRECISIONS, "mixed_bfloat16"):
        if precision == "mixed_bfloat16":
            model = albert_tf.load(model_dir, dtype="mixed_bfloat16")
        else:  # the pretraining model as the export would serve it
            model = load_for_serving(albert_tf.load, model_dir, precision).model
        scores = evaluate_pretraining(
            model,
            os.path.join(shards, "*.tfrecord*"),
            max_seq_length=meta["max_seq_length"],
            batch_size=64,
            max_batches=args.mlm_batches,
        )
        results[precision] = {
            k: round(float(v), 5)
            for k, v in scores.items()
            if k.startswith(("mlm_accuracy", "mlm_loss", "mlm_predictions"))
        }
        print(f"[{lang}] MLM {precision}: {results[precision]}", file=sys.stderr, flush=True)
    base = results["float32"]["mlm_accuracy"]
    for precision in ("bfloat16", "int8", "mixed_bfloat16"):
        change = 100 * (results[precision]["mlm_accuracy"] - base)
        results[precision]["change_points"] = round(change, 3)
    return results


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| model | items | variant | accuracy | agreement with float32 |",
        "|---|---|---|---|---|",
    ]
    for lang, r in report["models"].items():
        for set_name, s in r["multiple_choice"].items():
            for name, acc in s["accuracy"].items():
                agree = s["agreement_with_float32"].get(name)
                shown = "—" if agree is None else f"{agree:.2%}"
                lines.append(
                    f"| {lang} | {set_name} ({s['items']}) | {name} | {acc:.3f} | {shown} |"
                )
    lines += [
        "",
        "| model | precision | held-out MLM accuracy | change (points) |",
        "|---|---|---|---|",
    ]
    for lang, r in report["models"].items():
        for precision, m in r["mlm"].items():
            change = m.get("change_points")
            shown = "—" if change is None else f"{change:+.2f}"
            lines.append(f"| {lang} | {precision} | {m['mlm_accuracy']:.4f} | {shown} |")
    lines.append("")
    lines.append("Targets: agreement >= 99%; MLM accuracy change <= 0.5 points.")
    return "\n".join(lines)


class ServingFidelity(common.Benchmark):
    name = "serving_fidelity"
    what = (
        "agreement of bfloat16/int8 (and LiteRT) predictions with float32, and "
        "held-out MLM accuracy change, on models pretrained here"
    )
    isolated = False  # answers, not timings: each model in this process

    def add_flags(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--runs",
            required=True,
            help="comma-separated LANG=RUN_DIR pairs (demo_models' per-language work dirs)",
        )
        parser.add_argument(
            "--max_items", type=int, default=None, help="per set (0: all; smoke 20)"
        )
        parser.add_argument("--batch_size", type=int, default=32)
        parser.add_argument(
            "--mlm_batches", type=int, default=None, help="0: all held-out shards (smoke 1)"
        )

    def configure(self, args: argparse.Namespace) -> None:
        if args.max_items is None:
            args.max_items = 20 if args.smoke else 0
        if args.mlm_batches is None:
            args.mlm_batches = 1 if args.smoke else 0

    def header(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"models": {}}

    def plan(self, args: argparse.Namespace, report: dict[str, Any]) -> Steps:
        for pair in args.runs.split(","):
            lang, run_dir = pair.split("=", 1)
            params = {"lang": lang, "run_dir": run_dir}
            report["models"][lang] = yield Job(lang, params, f"{lang} model")

    def measure(self, args: argparse.Namespace, job: Job) -> dict[str, Any]:
        return {
            "run_dir": args.run_dir,
            "multiple_choice": multiple_choice_fidelity(args.run_dir, args.lang, args),
            "mlm": mlm_fidelity(args.run_dir, args.lang, args),
        }

    def table(self, report: dict[str, Any]) -> str:
        return markdown(report)


if __name__ == "__main__":
    common.main(ServingFidelity())
