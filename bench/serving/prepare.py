"""The serving benchmark's inputs, built once in a worker of their own.

In ``--workdir``: the English SentencePiece tokenizer padded to V=30000, the
random ALBERT-base-shaped multiple-choice model (and its not-shared twin) with
trained-like LayerNorm weights, its Hugging Face layout, the SavedModel exports
in every serving precision, the LiteRT exports and the packed workloads
(`bench.serving.workload`). The ONNX side is prepared by `bench.serving.peers`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench.common import build_padded_tokenizer, dir_bytes, model_config, summary_stats
from bench.serving.workdir import PREPARED
from bench.serving.workload import (
    FIELDS,
    HF_MODEL,
    ITEMS_FILE,
    LITERT,
    NUM_OPTIONS,
    SAVEDMODELS,
    WORKLOADS,
    WORKLOADS_FILE,
    typical_items,
)


def trained_like_layer_norms(model: Any) -> None:
    """LayerNorm weights spread as a trained model's are. Initialised ones (gamma 1,
    beta 0) would not time what users serve: Grappler drops a multiply by ones before
    oneDNN's LayerNorm fusion looks, so only trained LayerNorms run fused."""
    import numpy as np

    from albert_tf.layers.layer_norm import AlbertLayerNormalization

    rng = np.random.RandomState(0)
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, AlbertLayerNormalization):
            width = layer.gamma.shape[0]
            layer.gamma.assign(rng.uniform(0.5, 1.5, width).astype("float32"))
            layer.beta.assign(rng.normal(0.0, 0.1, width).astype("float32"))


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Tokenizer, model directory, SavedModel export and packed workloads in ``--workdir``."""
    import keras
    import numpy as np
    import tensorflow as tf

    import albert_tf
    from albert_tf.serving import export_saved_model
    from albert_tf.tasks.multiple_choice.data import pack_multiple_choice
    from albert_tf.tokenizers import load_tokenizer

    workdir = args.workdir
    config = model_config(args.smoke)
    tok_dir = os.path.join(workdir, "tokenizer")
    tok_info = build_padded_tokenizer(tok_dir, config.vocab_size, args.smoke)
    tokenizer = load_tokenizer(tok_dir)
    keras.utils.set_random_seed(0)
    model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    trained_like_layer_norms(model)
    model_dir = os.path.join(workdir, "model")
    albert_tf.save_model(model, model_dir, tokenizer=tokenizer)
    # Hugging Face's layout of the same weights: the hf and ONNX variants' model.
    from albert_tf.checkpoints.hf_export import export_hf

    export_hf(model_dir, os.path.join(workdir, HF_MODEL))
    # The BERT-base-shaped twin: same shape and FLOPs, a weight set per layer.
    keras.utils.set_random_seed(0)
    twin = albert_tf.AlbertMultipleChoice.from_albert_config(config.replace(share="none"))
    trained_like_layer_norms(twin)
    albert_tf.save_model(twin, os.path.join(workdir, "model_not_shared"), tokenizer=tokenizer)
    del model, twin
    saved_models, export_s, sizes = {}, {}, {}
    for variant, (which, precision) in SAVEDMODELS.items():
        source = model_dir if which == "shared" else f"{model_dir}_not_shared"
        start = time.perf_counter()
        # No finetune.json: the exporter's own defaults set the packing limits.
        saved_models[variant] = export_saved_model(
            source,
            os.path.join(workdir, "exported", variant),
            version=1,
            serving_precision=precision,
        )
        export_s[variant] = round(time.perf_counter() - start, 1)
        sizes[variant] = dir_bytes(saved_models[variant])
    saved_model = saved_models["savedmodel"]
    with open(os.path.join(saved_model, "assets.extra", "albert_tf.json")) as f:
        meta = json.load(f)

    largest = max(WORKLOADS.values())
    items = typical_items(largest)
    texts, shapes = {}, {}
    for name, batch in WORKLOADS.items():
        chosen = items[:batch]
        texts[name] = {
            "ids": [it["id"] for it in chosen],
            "context": [it["context"] for it in chosen],
            "question": [it["question"] for it in chosen],
            "options": [it["options"] for it in chosen],
        }
        # The same packing function the SavedModel runs in-graph.
        packed = pack_multiple_choice(
            tokenizer,
            tf.constant(texts[name]["context"]),
            tf.constant(texts[name]["question"]),
            tf.constant(texts[name]["options"]),
            max_seq_length=meta["max_seq_length"],
            max_qa_length=meta["max_qa_length"],
        )
        arrays = {k: packed[k].numpy().astype("int32") for k in FIELDS}
        np.savez(os.path.join(workdir, f"ids_{name}.npz"), **arrays)
        lengths = arrays["padding_mask"].sum(-1).reshape(-1).tolist()
        words_per_sequence = [
            len(f"{c} {q} {o}".split())
            for c, q, opts in zip(
                texts[name]["context"], texts[name]["question"], texts[name]["options"], strict=True
            )
            for o in opts
        ]
        words = {
            part: summary_stats(
                [len(t.split()) for t in texts[name][part]]
                if part != "options"
                else [len(o.split()) for opts in texts[name]["options"] for o in opts]
            )
            for part in ("context", "question", "options")
        }
        shapes[name] = {
            "batch": batch,
            "options": NUM_OPTIONS,
            "packed_shape": list(arrays["token_ids"].shape),
            "encoder_shape": [batch * NUM_OPTIONS, int(arrays["token_ids"].shape[-1])],
            "sequence_lengths": summary_stats(lengths),
            "padding_fraction": round(1 - sum(lengths) / arrays["token_ids"].size, 3),
            "truncated": bool(packed["context_truncated"].numpy().any()),
            # The sample-trained 4.4k-piece vocabulary splits words more than a
            # real 30k one would, so sequences are somewhat longer than ALBERT's.
            "pieces_per_word": round(
                (sum(lengths) - 3 * len(lengths)) / sum(words_per_sequence), 2
            ),
            "words": words,
        }
    with open(os.path.join(workdir, WORKLOADS_FILE), "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    # LiteRT's shapes are fixed at export: every sequence is padded to the longest
    # packed option of the workloads, so nothing is truncated.
    litert, litert_s = {}, {}
    longest = max(s["packed_shape"][-1] for s in shapes.values())
    from albert_tf.serving.litert import export_litert

    for variant, precision in LITERT.items():
        start = time.perf_counter()
        path = os.path.join(workdir, "litert", f"{variant}.tflite")
        litert[precision] = export_litert(
            model_dir, path, precision=precision, max_seq_length=longest
        )
        litert_s[precision] = round(time.perf_counter() - start, 1)
    info = {
        "config": config.to_hf_dict(),
        "tokenizer": tok_info,
        "saved_model": saved_model,
        "saved_models": saved_models,
        "saved_model_bytes": sizes,
        "export_s": export_s,
        "litert": litert,
        "litert_export_s": litert_s,
        "litert_max_seq_length": longest,
        "max_seq_length": meta["max_seq_length"],
        "max_qa_length": meta["max_qa_length"],
        "packing": "each batch padded to its longest packed option (exporter's behaviour)",
        "workloads": shapes,
        "items_file": os.path.relpath(ITEMS_FILE, os.getcwd()),
    }
    with open(os.path.join(workdir, PREPARED), "w") as f:
        json.dump(info, f, indent=2)
    return info
