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
* ``ort_*``: that same Hugging Face model through ``torch.onnx`` into ONNX Runtime
  (plain and optimised, float32 and int8). The export records how far its float32
  logits are from our Keras model's on the batch-1 workload.

Writes ``bench/results/serving.json`` and prints a markdown table::

    python bench/serving.py                          # everything (~10-15 min, 2 cores)
    python bench/serving.py --smoke                  # tiny model, checks the plumbing
    python bench/serving.py --workloads=batch1 --repeats=3
    python bench/serving.py --variants=savedmodel,hf --workdir=/tmp/srv  # keeps/reuses the export

Ratios (medians, same run): ``savedmodel / bare_encoder`` (the serving
wrapper's overhead; target <= 1.3 at batch 1) and ``hf / savedmodel``
(target >= 2: above 1 means the SavedModel is faster).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from common import (
    MULTIPLE_CHOICE_DATA,
    add_common_flags,
    build_padded_tokenizer,
    choices,
    dir_bytes,
    fmt,
    machine_info,
    model_config,
    output_path,
    pin_tf_threads,
    pin_torch_threads,
    publish,
    spawn,
    summary_stats,
    thread_env,
    thread_report,
    time_step,
    worker_main,
    write_report,
)

NAME = "serving"
# Our SavedModel in each serving precision, with the BERT-base-shaped not-shared
# twin (same FLOPs, 12x the weights: the seed's cache claim) beside it.
SAVEDMODELS = {
    "savedmodel": ("shared", "float32"),
    "savedmodel_bf16": ("shared", "bfloat16"),
    "savedmodel_int8": ("shared", "int8"),
    "not_shared": ("not_shared", "float32"),
    "not_shared_bf16": ("not_shared", "bfloat16"),
    "not_shared_int8": ("not_shared", "int8"),
}
# ONNX Runtime on Hugging Face's model exported to ONNX: as exported ("plain") or
# through onnxruntime.transformers.optimizer (model_type "bert"), each in float32
# and with quantize_dynamic's int8 weights.
ORT = {
    "ort_fp32": "plain",
    "ort_int8": "plain_int8",
    "ort_opt_fp32": "optimized",
    "ort_opt_int8": "optimized_int8",
}
# The optimised int8 model fed in length buckets, as our SavedModel runs large
# requests (albert_tf.serving.length_buckets): like for like.
ORT_BUCKETED = {"ort_opt_int8_buckets": "optimized_int8"}
LITERT = {"litert_fp32": "float32", "litert_int8": "int8"}
VARIANTS = (
    *SAVEDMODELS,
    "savedmodel_score_ids",
    "savedmodel_tokenize",
    "bare_encoder",
    *ORT,
    *ORT_BUCKETED,
    *LITERT,
    "hf",
)
WORKLOADS = {"batch1": 1, "batch32": 32}
NUM_OPTIONS = 4
ITEMS_FILE = os.path.join(MULTIPLE_CHOICE_DATA, "parable_en.jsonl.gz")
PREPARED = "prepare.json"
FIELDS = ("token_ids", "segment_ids", "padding_mask")


# --------------------------------------------------------------------------- workload
def build_qa(question: str, option: str) -> str:
    """The packer's question+option rule, for the Hugging Face side (which
    must not import albert_tf/TensorFlow): fill the blank, else append."""
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def typical_items(
    count: int,
    path: str = ITEMS_FILE,
    context_words: tuple[int, int] = (100, 150),
    max_option_words: int = 12,
) -> list[dict[str, Any]]:
    """The first ``count`` items of typical size, each cut to `NUM_OPTIONS` options.

    Typical: a context of ``context_words`` words and options of at most
    ``max_option_words`` words; the answer plus the first short distractors
    are kept, in their original order.
    """
    items = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if not context_words[0] <= len(record["context"].split()) <= context_words[1]:
                continue
            short = [
                i for i, o in enumerate(record["options"]) if len(o.split()) <= max_option_words
            ]
            if record["label"] not in short or len(short) < NUM_OPTIONS:
                continue
            others = [i for i in short if i != record["label"]][: NUM_OPTIONS - 1]
            keep = sorted([record["label"], *others])
            items.append(
                {
                    "id": record["id"],
                    "context": record["context"],
                    "question": record["question"],
                    "options": [record["options"][i] for i in keep],
                    "label": keep.index(record["label"]),
                }
            )
            if len(items) == count:
                return items
    raise ValueError(f"only {len(items)} typical items in {path}, need {count}")


def workload_texts(workdir: str, name: str) -> dict[str, list]:
    with open(os.path.join(workdir, "workloads.json"), encoding="utf-8") as f:
        return json.load(f)[name]


def workload_ids(workdir: str, name: str) -> dict[str, Any]:
    import numpy as np

    with np.load(os.path.join(workdir, f"ids_{name}.npz")) as data:
        return {k: data[k] for k in FIELDS}


# --------------------------------------------------------------------------- prepare
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
    from albert_tf.data.multiple_choice import pack_multiple_choice
    from albert_tf.serving import export_saved_model
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
    with open(os.path.join(workdir, "workloads.json"), "w", encoding="utf-8") as f:
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


# --------------------------------------------------------------------------- variants
def _rename_checksum(timing: dict[str, Any]) -> dict[str, Any]:
    # time_step calls the step's return value a loss; here it is a checksum
    # that forces the outputs (and shows every variant computed something).
    timing["checksum_first"] = timing.pop("loss_first_step")
    timing["checksum_last"] = timing.pop("loss_last_step")
    return timing


def measure_savedmodel(
    args: argparse.Namespace, signature: str, variant: str = "savedmodel"
) -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

    with open(os.path.join(args.workdir, PREPARED)) as f:
        path = json.load(f)["saved_models"][variant]
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

    timing = _rename_checksum(time_step(step, args.warmup, args.repeats))
    return {**timing, **info, "input_shape": list(ids["token_ids"].shape)}


def measure_bare_encoder(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    import albert_tf

    model = albert_tf.load_multiple_choice(os.path.join(args.workdir, "model"))
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

    timing = _rename_checksum(time_step(step, args.warmup, args.repeats))
    return {
        **timing,
        "model": "albert_tf.AlbertMultipleChoice (same checkpoint) in tf.function, packed ids",
        "input_shape": list(ids["token_ids"].shape),
    }


#: Our benchmark model in Hugging Face's layout (written by `prepare`).
HF_MODEL = "model_hf"


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
        with open(os.path.join(args.workdir, PREPARED)) as f:
            self.max_seq_length = json.load(f)["max_seq_length"]
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

    timing = _rename_checksum(time_step(step, args.warmup, args.repeats))
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

    ours = albert_tf.load_multiple_choice(os.path.join(args.workdir, "model"))
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


def measure_ort(args: argparse.Namespace, which: str, bucketed: bool = False) -> dict[str, Any]:
    import numpy as np
    import onnxruntime

    if bucketed:  # the rule our export records (this process does not import TensorFlow)
        with open(os.path.join(args.workdir, PREPARED)) as f:
            saved_model = json.load(f)["saved_model"]
        with open(os.path.join(saved_model, "assets.extra", "albert_tf.json")) as f:
            rule = json.load(f)["length_buckets"]

    with open(os.path.join(args.workdir, "onnx.json")) as f:
        path = json.load(f)["files"][which]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    options.inter_op_num_threads = args.inter_op_threads
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    load_s = time.perf_counter() - start
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


def measure_litert(args: argparse.Namespace, precision: str) -> dict[str, Any]:
    import numpy as np

    from albert_tf.serving.litert import LiteRTMultipleChoice

    with open(os.path.join(args.workdir, PREPARED)) as f:
        path = json.load(f)["litert"][precision]
    runner = LiteRTMultipleChoice(path, num_threads=os.cpu_count() or 1)
    texts = workload_texts(args.workdir, args.workload)
    items = list(zip(texts["context"], texts["question"], texts["options"], strict=True))

    def step() -> float:
        # One item per call, as on a device: a batch is a loop.
        return float(sum(np.sum(runner.predict(c, q, o)) for c, q, o in items))

    timing = _rename_checksum(time_step(step, args.warmup, args.repeats))
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


# --------------------------------------------------------------------------- worker
def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    os.environ.update(thread_env(cores, args.inter_op_threads, args.omp_wait_policy))
    if args.worker == "prepare":
        pin_tf_threads(cores, args.inter_op_threads)
        return prepare(args)
    if args.worker in ("hf", "prepare_onnx", *ORT, *ORT_BUCKETED):
        os.environ["USE_TF"] = "0"  # transformers must not pull TensorFlow in
        pin_torch_threads(cores, args.inter_op_threads)
        if args.worker == "prepare_onnx":
            return prepare_onnx(args)
        if args.worker in ORT:
            return measure_ort(args, ORT[args.worker])
        if args.worker in ORT_BUCKETED:
            return measure_ort(args, ORT_BUCKETED[args.worker], bucketed=True)
        return measure_hf(args)
    pin_tf_threads(cores, args.inter_op_threads)
    if args.worker == "bare_encoder":
        return measure_bare_encoder(args)
    if args.worker in LITERT:
        return measure_litert(args, LITERT[args.worker])
    if args.worker in SAVEDMODELS:
        return measure_savedmodel(args, "serving_default", args.worker)
    signature = {"savedmodel_score_ids": "score_ids", "savedmodel_tokenize": "tokenize"}
    return measure_savedmodel(args, signature[args.worker])


# --------------------------------------------------------------------------- report
def summarize(report: dict[str, Any]) -> None:
    """Ratios of medians per workload, in place (> 1: the second named is faster)."""
    for workload, variants in report["results"].items():
        report["ratios"][workload] = workload_ratios(variants)


def workload_ratios(variants: dict[str, Any]) -> dict[str, Any]:
    """Ratios of the medians of one workload's variants; each key says which over which."""
    med = {v: r["median_s"] for v, r in variants.items() if "median_s" in r}
    hf = variants.get("hf", {})
    ratios: dict[str, Any] = {}

    def ratio(name: str, numerator: str | None, denominator: str | None) -> None:
        if numerator in med and denominator in med:
            ratios[name] = round(med[numerator] / med[denominator], 3)

    def fastest(names) -> str | None:
        present = [n for n in names if n in med]
        return min(present, key=med.get) if present else None

    ours = fastest(("savedmodel", "savedmodel_bf16", "savedmodel_int8"))
    ort_int8 = fastest(("ort_int8", "ort_opt_int8"))
    ort_fp32 = fastest(("ort_fp32", "ort_opt_fp32"))
    if ours:
        ratios["our_fastest"] = ours
    ratio("savedmodel_over_bare_encoder", "savedmodel", "bare_encoder")
    ratio("hf_over_savedmodel", "hf", "savedmodel")
    # The targets: ours faster than ORT int8 (> 1), float32 within 1.1x.
    ratio("ort_int8_over_our_fastest", ort_int8, ours)
    ratio("ort_int8_buckets_over_our_fastest", "ort_opt_int8_buckets", ours)
    ratio("our_fp32_over_ort_fp32", "savedmodel", ort_fp32)
    ratio("bf16_speedup", "savedmodel", "savedmodel_bf16")
    ratio("int8_speedup", "savedmodel", "savedmodel_int8")
    # The seed's claim: same FLOPs, so shared weights win only through caches.
    ratio("not_shared_over_shared_fp32", "not_shared", "savedmodel")
    ratio("not_shared_over_shared_bf16", "not_shared_bf16", "savedmodel_bf16")
    ratio("not_shared_over_shared_int8", "not_shared_int8", "savedmodel_int8")
    ratio("litert_int8_over_our_fastest", "litert_int8", ours)
    ratio("tokenize_share_of_savedmodel", "savedmodel_tokenize", "savedmodel")
    if "bare_encoder" in med and "model_forward" in hf:
        ratios["hf_forward_over_bare_encoder"] = round(
            hf["model_forward"]["median_s"] / med["bare_encoder"], 3
        )
    return ratios


def markdown(report: dict[str, Any]) -> str:
    prep = report["prepared"]
    cfg = prep["config"]
    lines = [
        f"Model: V={cfg['vocab_size']}, E={cfg['embedding_size']}, H={cfg['hidden_size']}, "
        f"L={cfg['num_hidden_layers']} (shared), heads {cfg['num_attention_heads']}, "
        f"FFN {cfg['intermediate_size']}; tokenizer {prep['tokenizer']['trained_pieces']} "
        f"trained pieces padded to {prep['tokenizer']['vocab_size']}; exporter limits "
        f"max_seq_length {prep['max_seq_length']}, max_qa_length {prep['max_qa_length']} "
        "(batches padded to their longest option); "
        f"CPU {report['machine']['cpu_model']}, {report['machine']['cores']} cores",
        "",
    ]
    for workload in report["results"]:
        w = prep["workloads"][workload]
        lengths = w["sequence_lengths"]
        lines.append(
            f"{workload}: packed {w['packed_shape']} (real lengths min {lengths['min']}, "
            f"median {lengths['median']}, max {lengths['max']}; {w['padding_fraction']:.0%} "
            f"padding; {w['pieces_per_word']} pieces/word; context median "
            f"{w['words']['context']['median']} words)"
        )
    lines += [
        "",
        "| workload | variant | encoder input [B·C, S] | median ms | min ms | max ms | items/s "
        "| other CPU | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, variants in report["results"].items():
        batch = prep["workloads"][workload]["batch"]
        for name, r in variants.items():
            if "median_s" not in r:
                error = str(r.get("error", "no result"))[:120].replace("|", "/")
                lines.append(f"| {workload} | {name} | failed: {error} |||||||")
                continue
            # Each variant's own input: HF's fast tokenizer may pack a piece or two differently.
            b, c, length = r["input_shape"]
            shape = (b * c, length)
            note = ""
            if name.startswith("savedmodel") or name.startswith("not_shared"):
                note = f"signature {r['signature']}, load {r['load_s']} s"
            if name in ORT or name in ORT_BUCKETED:
                same = "yes" if r["same_ids_as_ours"]["fast"] else "no"
                note = (
                    f"HF fast tokeniser {r['tokenizer_fast']['median_s'] * 1e3:.1f} ms + "
                    f"run {r['model_forward']['median_s'] * 1e3:.1f} ms; ids equal ours: {same}"
                )
            if name in LITERT:
                note = r["model"]
            if name == "hf":
                same = {k: "yes" if v else "no" for k, v in r["same_ids_as_ours"].items()}
                note = (
                    f"fast tokeniser + forward ({r['attention']}); ids equal ours: "
                    f"fast {same['fast']}, slow {same['slow']}"
                )
            lines.append(
                f"| {workload} | {name} | {shape[0]}×{shape[1]} | {r['median_s'] * 1e3:.1f} "
                f"| {r['min_s'] * 1e3:.1f} | {r['max_s'] * 1e3:.1f} "
                f"| {batch / r['median_s']:.2f} "
                f"| {fmt(r['other_processes_cpu_fraction'], '.0%')} | {note} |"
            )
            if name == "hf":
                for part in ("tokenizer_fast", "tokenizer_slow", "model_forward"):
                    p = r[part]
                    key = "input_shape_slow" if part == "tokenizer_slow" else "input_shape"
                    b, c, length = r[key]
                    lines.append(
                        f"| {workload} | hf: {part} | {b * c}×{length} "
                        f"| {p['median_s'] * 1e3:.1f} | {p['min_s'] * 1e3:.1f} "
                        f"| {p['max_s'] * 1e3:.1f} | | | |"
                    )
    lines.append("")
    for workload, ratios in report["ratios"].items():
        shown = ", ".join(f"{k} {v}" for k, v in ratios.items() if not k.startswith("target"))
        lines.append(f"{workload}: {shown or 'no ratios (missing variants)'}")
    lines.append(
        "Targets: ort_int8 (faster of plain/optimised) over our fastest faithful variant > 1; "
        "our float32 over ORT float32 <= 1.1; tokenisation <= 2% of the answer. Fidelity: "
        "bench/results/serving_fidelity.json."
    )
    return "\n".join(lines)


def orchestrate(args: argparse.Namespace) -> None:
    variants = choices(args.variants, VARIANTS, "variant")
    workloads = choices(args.workloads, tuple(WORKLOADS), "workload")
    output = output_path(args, NAME)
    own_workdir = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="albert_serving_")
    os.makedirs(workdir, exist_ok=True)
    script = os.path.abspath(__file__)
    common_args = ["--workdir", workdir, "--hf_attention", args.hf_attention]
    report: dict[str, Any] = {
        "what": "latency of one multiple-choice request (4 options per item): our "
        "raw-text SavedModel in float32/bfloat16/int8 (and its BERT-base-shaped not-shared "
        "twin), the bare Keras model, LiteRT, ONNX Runtime (plain/optimised, float32/int8) "
        "and Hugging Face PyTorch",
        "command": [os.path.relpath(__file__), *sys.argv[1:]],
        "smoke": args.smoke,
        "machine": machine_info(),
        "threads": thread_report(args),
        "results": {w: {} for w in workloads},
        "ratios": {},
    }
    try:
        prepared = os.path.join(workdir, PREPARED)
        if os.path.exists(prepared):  # --workdir of an earlier run: reuse its export
            with open(prepared) as f:
                report["prepared"] = json.load(f)
        else:
            print("[prepare] tokenizer, model, export ...", file=sys.stderr, flush=True)
            report["prepared"] = spawn(script, ["--worker", "prepare", *common_args], args)
            if "error" in report["prepared"]:
                write_report(report, output)
                raise SystemExit(f"prepare failed: {report['prepared']['error']}")
        onnx_info = os.path.join(workdir, "onnx.json")
        if set(variants) & {*ORT, *ORT_BUCKETED} and not os.path.exists(onnx_info):
            print("[prepare_onnx] export, optimise, quantise ...", file=sys.stderr, flush=True)
            onnx_report = spawn(script, ["--worker", "prepare_onnx", *common_args], args)
            with open(onnx_info, "w") as f:
                json.dump(onnx_report, f, indent=2)
        if os.path.exists(onnx_info):
            with open(onnx_info) as f:
                report["onnx"] = json.load(f)
        for workload in workloads:
            warmup, repeats = (
                (args.warmup, args.repeats)
                if WORKLOADS[workload] == 1
                else (args.large_warmup, args.large_repeats)
            )
            for v in variants:
                print(f"[{v}] {workload} ...", file=sys.stderr, flush=True)
                worker = ["--worker", v, "--workload", workload, *common_args]
                worker += ["--warmup", str(warmup), "--repeats", str(repeats)]
                r = spawn(script, worker, args)
                report["results"][workload][v] = r
                done = f"{r['median_s'] * 1e3:.1f} ms" if "median_s" in r else r["error"]
                print(f"[{v}] {workload}: {done}", file=sys.stderr, flush=True)
                summarize(report)
                write_report(report, output)
    finally:
        if own_workdir and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    summarize(report)
    publish(report, output, markdown(report))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_flags(parser)
    parser.add_argument("--variants", default=",".join(VARIANTS))
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
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats is None:
        args.repeats = 2 if args.smoke else 20
    if args.warmup is None:
        args.warmup = 1 if args.smoke else 3
    if args.large_repeats is None:
        args.large_repeats = 2 if args.smoke else 3
    if args.large_warmup is None:
        args.large_warmup = 1
    if args.worker:
        worker_main(lambda: run_worker(args))
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
