"""Our variants: the raw-text SavedModel of each task, in a worker that imports only
``tensorflow`` and ``tensorflow_text``, as a server would."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.serving.tasks.answers import ours_answers
from bench.serving.tasks.workload import prepared, requests
from bench.serving.workload import time_answers


def measure_savedmodel(args: argparse.Namespace, variant: str) -> dict[str, Any]:
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    path = prepared(args.workdir)["tasks"][args.task]["saved_models"][variant]
    start = time.perf_counter()
    loaded = tf.saved_model.load(path)
    load_s = time.perf_counter() - start
    fn = loaded.signatures["serving_default"]
    inputs = requests(args.task, args.workload)
    if args.task == "classification":
        inputs = {**inputs, "text_pair": [""] * len(inputs["text"])}

    def call() -> dict[str, Any]:
        # Strings arrive from the request each time, as in a server.
        return fn(**{k: tf.constant(v) for k, v in inputs.items()})

    def step() -> float:
        out = call()
        return float(sum(float(tf.reduce_sum(tf.cast(v, tf.float32))) for v in _numeric(out)))

    timing = time_answers(step, args.warmup, args.repeats)
    # Where the time goes: the in-graph tokenisation alone (the tokenize signature).
    tokenize = loaded.signatures["tokenize"]

    def tokenize_step() -> float:
        out = tokenize(**{k: tf.constant(v) for k, v in inputs.items()})
        return float(sum(float(tf.reduce_sum(tf.cast(v, tf.float32))) for v in _numeric(out)))

    tokenize_timing = time_answers(tokenize_step, args.warmup, args.repeats)
    tokenized = tokenize(**{k: tf.constant(v) for k, v in inputs.items()})
    key = "pieces" if args.task == "tagging" else "token_ids"
    return {
        **timing,
        "tokenize_median_s": tokenize_timing["median_s"],
        "answers": ours_answers(args.task, call()),
        "model_input_shape": list(tokenized[key].shape),
        "load_s": round(load_s, 2),
        "path": path,
        "albert_tf_imported": "albert_tf" in sys.modules,
    }


def _numeric(outputs: dict[str, Any]) -> list[Any]:
    import tensorflow as tf

    return [v for v in outputs.values() if v.dtype != tf.string]
