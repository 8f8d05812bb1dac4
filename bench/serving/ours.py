"""Our variants: the exported SavedModel, its signatures, the bare Keras model, LiteRT.

Each runs in a worker of its own and imports only what a server would: the
SavedModel variants `tensorflow` and `tensorflow_text`, LiteRT the package's
`LiteRTMultipleChoice`.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from bench.serving.workload import (
    FIELDS,
    NUM_OPTIONS,
    prepared,
    time_answers,
    workload_ids,
    workload_texts,
)


def measure_savedmodel(
    args: argparse.Namespace, signature: str, variant: str = "savedmodel"
) -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    path = prepared(args.workdir)["saved_models"][variant]
    start = time.perf_counter()
    loaded = tf.saved_model.load(path)
    load_s = time.perf_counter() - start
    fn = loaded.signatures[signature]
    texts = workload_texts(args.workdir, args.workload)
    ids = workload_ids(args.workdir, args.workload)
    info: dict[str, Any] = {"load_s": round(load_s, 2), "signature": signature, "path": path}
    if signature == "score_ids":
        inputs = {k: tf.constant(v) for k, v in ids.items()}

        def step() -> float:
            return float(tf.reduce_sum(fn(**inputs)["logits"]))

    else:

        def call() -> dict[str, tf.Tensor]:
            # Strings arrive from the request each time, as in a server.
            return fn(
                context=tf.constant(texts["context"]),
                question=tf.constant(texts["question"]),
                options=tf.constant(texts["options"]),
            )

        if signature == "tokenize":
            # The graph's packing must equal what the other variants are fed.
            out = call()
            info["same_ids_as_prepared"] = all(
                np.array_equal(out[k].numpy(), ids[k]) for k in FIELDS
            )

            def step() -> float:
                return float(tf.reduce_sum(call()["token_ids"]))

        else:

            def step() -> float:
                return float(tf.reduce_sum(call()["logits"]))

    timing = time_answers(step, args.warmup, args.repeats)
    return {**timing, **info, "input_shape": list(ids["token_ids"].shape)}


def measure_bare_encoder(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    import albert_tf

    model = albert_tf.load_task_model(os.path.join(args.workdir, "model"), "multiple_choice")
    ids = workload_ids(args.workdir, args.workload)
    inputs = {k: tf.constant(v) for k, v in ids.items()}
    spec = tf.TensorSpec([None, None, None], tf.int32)

    # Dynamic shapes as in the SavedModel's signatures: no retracing per length.
    @tf.function(input_signature=[spec, spec, spec])
    def forward(token_ids, segment_ids, padding_mask):
        features = {"token_ids": token_ids, "segment_ids": segment_ids}
        return model(features | {"padding_mask": padding_mask}, training=False)

    def step() -> float:
        return float(tf.reduce_sum(forward(**inputs)))

    timing = time_answers(step, args.warmup, args.repeats)
    return {
        **timing,
        "model": "albert_tf.AlbertMultipleChoice (same checkpoint) in tf.function, packed ids",
        "input_shape": list(ids["token_ids"].shape),
    }


def measure_litert(args: argparse.Namespace, precision: str) -> dict[str, Any]:
    import numpy as np

    from albert_tf.serving.litert import LiteRTMultipleChoice

    path = prepared(args.workdir)["litert"][precision]
    runner = LiteRTMultipleChoice(path, num_threads=os.cpu_count() or 1)
    texts = workload_texts(args.workdir, args.workload)
    items = list(zip(texts["context"], texts["question"], texts["options"], strict=True))

    def step() -> float:
        # One item per call, as on a device: a batch is a loop.
        return float(sum(np.sum(runner.predict(c, q, o)) for c, q, o in items))

    timing = time_answers(step, args.warmup, args.repeats)
    # The first item's ids, cut to the width the SavedModel packed the workload to.
    packed, ours = runner.tokenize(*items[0]), workload_ids(args.workdir, args.workload)
    width = ours["token_ids"].shape[-1]
    same = all(np.array_equal(packed[k][..., :width], ours[k][:1]) for k in FIELDS)
    return {
        **timing,
        "input_shape": [len(items), NUM_OPTIONS, packed["token_ids"].shape[-1]],
        "same_ids_as_ours": same,
        "model": f"LiteRT {precision}, XNNPACK, {runner.num_threads} threads, one item per invoke",
        "bytes": os.path.getsize(path),
    }
