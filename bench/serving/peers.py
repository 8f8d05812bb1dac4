"""The peers: Hugging Face (PyTorch) and ONNX Runtime, on our model's weights.

`prepare` exports our model to Hugging Face's layout (`bench.serving.prepare`);
here `prepare_onnx` exports that model to ONNX (plain, optimised, each also
int8), and the workers time transformers' tokenizers + `AlbertForMultipleChoice`
(``hf``) and ONNX Runtime (``ort_*``). These workers never import TensorFlow or
albert_tf (except `prepare_onnx`'s check of the logits against the Keras model).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.serving.workdir import ONNX_INFO
from bench.serving.workload import (
    FIELDS,
    HF_MODEL,
    NUM_OPTIONS,
    ORT,
    build_qa,
    prepared,
    time_answers,
    workload_ids,
    workload_texts,
)


def hf_model(args: argparse.Namespace, attention: str):
    """transformers' `AlbertForMultipleChoice` with our model's weights, in eval mode."""
    import transformers

    return transformers.AlbertForMultipleChoice.from_pretrained(
        os.path.join(args.workdir, HF_MODEL), attn_implementation=attention
    ).eval()


class HfTokenization:
    """The workload through transformers' tokenizers, packed as our packer does."""

    def __init__(self, args: argparse.Namespace):
        import transformers
        from transformers.utils import sentencepiece_model_pb2_new

        # The fast tokenizer is converted from spiece.model through sentencepiece's
        # generated proto module, which needs protobuf 7 (Beam pins 6);
        # transformers' own copy of that module reads the same proto on 6.
        sys.modules.setdefault("sentencepiece.sentencepiece_model_pb2", sentencepiece_model_pb2_new)
        spiece = os.path.join(args.workdir, "tokenizer", "spiece.model")
        self.fast = transformers.AlbertTokenizerFast(vocab_file=spiece)
        self.slow = transformers.AlbertTokenizer(vocab_file=spiece)
        self.max_seq_length = prepared(args.workdir)["max_seq_length"]
        texts = workload_texts(args.workdir, args.workload)
        self.batch = len(texts["context"])
        self.firsts = [c for c in texts["context"] for _ in range(NUM_OPTIONS)]
        per_item = zip(texts["question"], texts["options"], strict=True)
        self.seconds = [build_qa(q, o) for q, opts in per_item for o in opts]
        self.ids = workload_ids(args.workdir, args.workload)

    def encode(self, tokenizer, tensors: str = "pt") -> dict[str, Any]:
        enc = tokenizer(
            self.firsts,
            self.seconds,
            truncation="only_first",  # the context is cut first, as our packer does
            max_length=self.max_seq_length,
            padding="longest",  # to the batch's longest, as the SavedModel
            return_tensors=tensors,
        )
        return {k: v.reshape(self.batch, NUM_OPTIONS, -1) for k, v in enc.items()}

    def same_ids(self, enc: dict[str, Any]) -> bool:
        import numpy as np

        pairs = zip(("input_ids", "token_type_ids", "attention_mask"), FIELDS, strict=True)
        return all(
            tuple(enc[h].shape) == self.ids[o].shape
            and np.array_equal(np.asarray(enc[h]), self.ids[o])
            for h, o in pairs
        )


def _part_stats(times: list[float], repeats: int) -> dict[str, float]:
    times = times[-repeats:]  # the timed calls, not the warm-up
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def time_tokenize_and_run(
    args: argparse.Namespace, tokenize: Callable[[], Any], run: Callable[[Any], float]
) -> dict[str, Any]:
    """`time_step` of ``run(tokenize())``, with each half's times reported apart."""
    tok_times: list[float] = []
    model_times: list[float] = []

    def step() -> float:
        start = time.perf_counter()
        encoded = tokenize()
        mid = time.perf_counter()
        value = run(encoded)
        tok_times.append(mid - start)
        model_times.append(time.perf_counter() - mid)
        return value

    timing = time_answers(step, args.warmup, args.repeats)
    return {
        **timing,
        "tokenizer_fast": _part_stats(tok_times, args.repeats),
        "model_forward": _part_stats(model_times, args.repeats),
    }


def measure_hf(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    model = hf_model(args, args.hf_attention)
    tok = HfTokenization(args)

    def run(enc: dict[str, Any]) -> float:
        with torch.inference_mode():
            return float(model(**enc).logits.sum())

    timing = time_tokenize_and_run(args, lambda: tok.encode(tok.fast), run)
    slow_times = []
    tok.encode(tok.slow)  # first call builds caches
    for _ in range(args.repeats):
        start = time.perf_counter()
        tok.encode(tok.slow)
        slow_times.append(time.perf_counter() - start)
    enc, enc_slow = tok.encode(tok.fast), tok.encode(tok.slow)
    return {
        **timing,
        "tokenizer_slow": _part_stats(slow_times, args.repeats),
        "same_ids_as_ours": {"fast": tok.same_ids(enc), "slow": tok.same_ids(enc_slow)},
        "input_shape": list(enc["input_ids"].shape),
        "input_shape_slow": list(enc_slow["input_ids"].shape),
        "model": "transformers AlbertForMultipleChoice (our weights via convert --target=hf), "
        "eval, torch.inference_mode",
        "attention": model.config._attn_implementation,
        "tokenizer": "AlbertTokenizerFast (converted offline from the same spiece.model)",
    }


ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def prepare_onnx(args: argparse.Namespace) -> dict[str, Any]:
    """Hugging Face's model → ONNX (plain, optimised) → int8 dynamic quantisation."""
    import numpy as np
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    # Eager attention: the pattern onnxruntime's BERT fusion recognises.
    model = hf_model(args, "eager")
    config = model.config
    ids = workload_ids(args.workdir, "batch1")
    dummy = tuple(
        torch.from_numpy(ids[k].astype("int64"))
        for k in ("token_ids", "padding_mask", "segment_ids")
    )
    out_dir = os.path.join(args.workdir, "onnx")
    os.makedirs(out_dir, exist_ok=True)
    files = {name: os.path.join(out_dir, f"{name}.onnx") for name in ORT.values()}
    axes = {"batch": 0, "options": 1, "sequence": 2}
    start = time.perf_counter()
    torch.onnx.export(
        model,
        dummy,
        files["plain"],
        input_names=list(ONNX_INPUTS),
        output_names=["logits"],
        dynamic_axes={
            **{k: {v: n for n, v in axes.items()} for k in ONNX_INPUTS},
            "logits": {0: "batch", 1: "options"},
        },
        opset_version=17,
        dynamo=False,  # the TorchScript exporter: the one optimizer.py's fusions target
    )
    optimized = optimize_model(
        files["plain"],
        model_type="bert",
        num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size,
    )
    fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    optimized.save_model_to_file(files["optimized"])
    for name in ("plain", "optimized"):
        quantize_dynamic(
            files[name],
            files[f"{name}_int8"],
            weight_type=QuantType.QInt8,
            # Shape inference cannot type the ops the fusions introduce.
            extra_options={"DefaultTensorType": 1},  # onnx.TensorProto.FLOAT
        )
    # The same weights as our SavedModel: ONNX Runtime's float32 logits against the
    # Keras model's on the batch-1 workload.
    import albert_tf

    ours = albert_tf.load_task_model(os.path.join(args.workdir, "model"), "multiple_choice")
    ours_logits = np.asarray(ours(ids, training=False))
    session = onnxruntime.InferenceSession(files["plain"], providers=["CPUExecutionProvider"])
    feed = dict(zip(ONNX_INPUTS, (d.numpy() for d in dummy), strict=True))
    ort_logits = session.run(["logits"], feed)[0]
    return {
        "files": files,
        "bytes": {k: os.path.getsize(v) for k, v in files.items()},
        "max_abs_logit_difference_vs_albert_tf": float(np.abs(ort_logits - ours_logits).max()),
        "optimizer_fused_ops": fused,
        "prepare_s": round(time.perf_counter() - start, 1),
        "onnxruntime": onnxruntime.__version__,
        "exporter": f"torch.onnx.export (TorchScript), torch {torch.__version__}, opset 17",
    }


def ort_session(path: str, inter_op_threads: int):
    """An ONNX Runtime CPU session on ``path`` as the benchmarks time it (every core
    within an op, all graph optimisations), and the seconds it took to load."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    options.inter_op_num_threads = inter_op_threads
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return session, time.perf_counter() - start


def measure_ort(args: argparse.Namespace, which: str, bucketed: bool = False) -> dict[str, Any]:
    import numpy as np
    import onnxruntime

    if bucketed:  # the rule our export records (this process does not import TensorFlow)
        saved_model = prepared(args.workdir)["saved_model"]
        with open(os.path.join(saved_model, "assets.extra", "albert_tf.json")) as f:
            rule = json.load(f)["length_buckets"]

    with open(os.path.join(args.workdir, ONNX_INFO)) as f:
        path = json.load(f)["files"][which]
    session, load_s = ort_session(path, args.inter_op_threads)
    tok = HfTokenization(args)

    def run(enc: dict[str, Any]) -> float:
        feed = {k: enc[k].astype(np.int64) for k in ONNX_INPUTS}
        sequences = feed["input_ids"].shape[0] * feed["input_ids"].shape[1]
        if not bucketed or sequences < rule["from_sequences"]:
            return float(session.run(None, feed)[0].sum())
        # Our SavedModel's rule: sorted by length, one call per bucket, padded to its longest.
        flat = {k: v.reshape(-1, v.shape[-1]) for k, v in feed.items()}
        lengths = flat["attention_mask"].sum(-1)
        total = 0.0
        for rows in np.array_split(np.argsort(lengths, kind="stable"), rule["buckets"]):
            width = max(int(lengths[rows].max()), 1)
            bucket = {k: v[rows][:, None, :width] for k, v in flat.items()}
            total += float(session.run(None, bucket)[0].sum())
        return total

    timing = time_tokenize_and_run(args, lambda: tok.encode(tok.fast, tensors="np"), run)
    enc = tok.encode(tok.fast, tensors="np")
    return {
        **timing,
        "same_ids_as_ours": {"fast": tok.same_ids(enc)},
        "input_shape": list(enc["input_ids"].shape),
        "load_s": round(load_s, 2),
        "model": f"ONNX Runtime {onnxruntime.__version__}, {which}, CPUExecutionProvider",
    }
