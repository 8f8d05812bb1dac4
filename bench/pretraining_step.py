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

Variants: ``matmul_peak`` (TF and torch matmul GFLOP/s), ``ours``,
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
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
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
    time_step,
)

DEFAULT_OUTPUT = os.path.join(HERE, "results", "pretraining_step.json")
VARIANTS = (
    "matmul_peak",
    "ours",
    "ours_unfused",
    "keras_hub",
    "keras_hub_xla",
    "hf_eager",
    "hf_compile",
)
PRECISIONS = ("float32", "bfloat16")
# Our own step without the fused kernels: reported beside ours, not a peer.
OWN = ("ours", "ours_unfused")
PEERS = tuple(v for v in VARIANTS if v != "matmul_peak" and v not in OWN)
# Variants whose first calls compile (XLA, Inductor) get this many extra warm-ups.
EXTRA_COMPILE_WARMUP = 2


@dataclasses.dataclass(frozen=True)
class Shape:
    vocab: int
    embed: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    batch: int
    seq: int
    predictions: int
    max_position: int = 512
    type_vocab: int = 2


FULL = Shape(
    vocab=30000, embed=128, hidden=768, layers=12, heads=12, ffn=3072, batch=16, seq=128,
    predictions=20,
)  # fmt: skip
SMOKE = Shape(
    vocab=1000, embed=16, hidden=64, layers=2, heads=2, ffn=128, batch=2, seq=16, predictions=3
)


# --------------------------------------------------------------------------- FLOPs
def albert_forward_flops(
    *,
    vocab: int,
    embed: int,
    hidden: int,
    layers: int,
    ffn: int,
    batch: int,
    seq: int,
    predictions: int,
) -> dict[str, int]:
    """Forward matmul FLOPs (2·m·n·k each) of one MLM + SOP step, by part.

    Embedding lookups, softmax, LayerNorm and activations are not matmuls
    and are left out, as usual for MFU. The MLM head runs only at the
    ``batch × predictions`` masked positions.
    """
    tokens = batch * seq
    masked = batch * predictions
    per_layer = (
        2 * tokens * hidden * 3 * hidden  # Q, K, V projections
        + 2 * batch * seq * seq * hidden  # scores Q·K^T, summed over heads
        + 2 * batch * seq * seq * hidden  # probabilities · V
        + 2 * tokens * hidden * hidden  # attention output projection
        + 2 * tokens * hidden * ffn * 2  # FFN in and out
    )
    return {
        "embedding_projection": 2 * tokens * embed * hidden,
        "transformer_layers": layers * per_layer,
        "pooler": 2 * batch * hidden * hidden,
        "sop_classifier": 2 * batch * hidden * 2,
        "mlm_dense": 2 * masked * hidden * embed,
        "mlm_decoder": 2 * masked * embed * vocab,
    }


def albert_training_flops(**shape: int) -> int:
    """Model FLOPs of a training step: 3 × forward (backward ≈ 2 × forward)."""
    return 3 * sum(albert_forward_flops(**shape).values())


def _flops_args(shape: Shape) -> dict[str, int]:
    fields = ("vocab", "embed", "hidden", "layers", "ffn", "batch", "seq", "predictions")
    return {k: getattr(shape, k) for k in fields}


# --------------------------------------------------------------------------- data
def synthetic_batch(shape: Shape, seed: int = 0) -> dict[str, Any]:
    """The one batch every variant trains on, as numpy arrays.

    Ids in [5, V) (no special tokens), all tokens real, two segments split at
    a random point, distinct sorted mask positions in [1, seq - 1).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    b, s, p = shape.batch, shape.seq, shape.predictions
    token_ids = rng.integers(5, shape.vocab, (b, s)).astype("int32")
    cut = rng.integers(2, s - 1, b)
    segment_ids = (np.arange(s)[None, :] >= cut[:, None]).astype("int32")
    positions = np.stack(
        [np.sort(rng.choice(np.arange(1, s - 1), p, replace=False)) for _ in range(b)]
    )
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": np.ones((b, s), "int32"),
        "mask_positions": positions.astype("int32"),
        "mask_ids": np.take_along_axis(token_ids, positions, axis=1).astype("int32"),
        "mask_weights": np.ones((b, p), "float32"),
        "sentence_order_label": rng.integers(0, 2, b).astype("int32"),
    }


FEATURE_KEYS = ("token_ids", "segment_ids", "padding_mask", "mask_positions")
LABEL_KEYS = ("mask_ids", "mask_weights", "sentence_order_label")


# --------------------------------------------------------------------------- ours
def albert_config_for(shape: Shape):
    """The preset at full size (checked against `shape`), else a tiny config."""
    import albert_tf

    if shape == FULL:
        config = albert_tf.get_preset("albert_base_v2")
    else:
        config = albert_tf.AlbertConfig(
            vocab_size=shape.vocab,
            embedding_size=shape.embed,
            hidden_size=shape.hidden,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            intermediate_size=shape.ffn,
        )
    # The preset keeps the v2 release's 0.1 dropout before the SOP classifier;
    # the peers have none. On a [B, H] vector its cost is nil either way.
    config = config.replace(classifier_dropout_prob=0.0)
    expected = {
        "vocab_size": shape.vocab,
        "embedding_size": shape.embed,
        "hidden_size": shape.hidden,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "intermediate_size": shape.ffn,
        "hidden_act": "gelu_new",
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "max_position_embeddings": shape.max_position,
        "type_vocab_size": shape.type_vocab,
        "num_hidden_groups": 1,
        "inner_group_num": 1,
        "share": "all",
    }
    wrong = {k: (getattr(config, k), v) for k, v in expected.items() if getattr(config, k) != v}
    if wrong:
        raise ValueError(f"config differs from the benchmark shape (got, want): {wrong}")
    return config


def build_ours_step(
    shape: Shape, precision: str, workdir: str, fused_kernels: bool = True
) -> tuple[Callable[[], float], dict]:
    """This package's real training step on the shared batch.

    Builds a `PretrainingTrainer` (LAMB, global-norm clipping) on synthetic
    shards, takes one batch from its own input iterator for the structure and
    dtypes, fills it with the shared batch and returns a step that runs
    ``trainer._train_fn(*trainer._distribute(batch))``: the input pipeline is
    not timed. Change the trainer options here to benchmark another setup.
    """
    import tensorflow as tf

    sys.path.insert(0, HERE)
    from input_pipeline import synthetic_vocab, write_synthetic_shards

    from albert_tf.training.trainer import PretrainingOptions, PretrainingTrainer

    pattern = write_synthetic_shards(workdir, shape.seq, num_examples=8 * shape.batch)
    synthetic_vocab().save(workdir)  # the pipeline reads masking_vocab.json
    options = PretrainingOptions(
        model_dir=os.path.join(workdir, "model"),
        train_files=pattern,
        max_seq_length=shape.seq,
        max_predictions_per_seq=shape.predictions,
        train_batch_size=shape.batch,
        num_train_steps=1000,
        num_warmup_steps=10,
        optimizer="lamb",
        precision=precision,
        fused_kernels=fused_kernels,
        progress_bar=False,
    )
    trainer = PretrainingTrainer(albert_config_for(shape), options)
    features, labels = next(trainer._train_iterator)
    data = synthetic_batch(shape)

    def fill(part: dict) -> dict:
        out = {}
        for key, like in part.items():
            value = tf.constant(data[key], like.dtype)
            if value.shape != like.shape:
                raise ValueError(f"{key}: pipeline gives {like.shape}, benchmark {value.shape}")
            out[key] = value
        return out

    batch = (fill(features), fill(labels))

    def step() -> float:
        out = trainer._train_fn(*trainer._distribute(batch))
        return float(
            out["mlm_loss_sum"] / out["mlm_count"] + out["sop_loss_sum"] / out["sop_count"]
        )

    info = {
        "optimizer": "LAMB (AlbertOptimizer, layer adaptation) + clip by global norm 1.0",
        "model": "albert_tf.AlbertPretrainingModel via PretrainingTrainer",
        "dtype_policy": {"float32": "float32", "bfloat16": "mixed_bfloat16"}[precision],
        "attention": "albert_tf encoder (padding mask applied)",
        "fused_kernels": fused_kernels,
        "note": "preset's classifier_dropout_prob 0.1 set to 0, as the peers",
    }
    return step, info


# --------------------------------------------------------------------------- keras-hub
def build_keras_hub_step(
    shape: Shape, precision: str, jit_compile: bool
) -> tuple[Callable[[], float], dict]:
    """keras-hub's AlbertBackbone + its MaskedLMHead (tied) + Dense(2) SOP."""
    import keras
    import keras_hub
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    policy = {"float32": "float32", "bfloat16": "mixed_bfloat16"}[precision]
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=shape.vocab,
        num_layers=shape.layers,
        num_heads=shape.heads,
        num_groups=1,
        num_inner_repetitions=1,
        embedding_dim=shape.embed,
        hidden_dim=shape.hidden,
        intermediate_dim=shape.ffn,
        dropout=0.0,
        max_sequence_length=shape.max_position,
        num_segments=shape.type_vocab,
        dtype=policy,
    )
    mlm_head = keras_hub.layers.MaskedLMHead(
        token_embedding=backbone.token_embedding,
        intermediate_activation=lambda x: keras.activations.gelu(x, approximate=True),
        layer_norm_epsilon=1e-12,
        dtype=backbone.dtype_policy,
        name="mlm_head",
    )
    sop_head = keras.layers.Dense(2, dtype=backbone.dtype_policy, name="sop_head")
    data = synthetic_batch(shape)
    features = {k: tf.constant(data[k]) for k in FEATURE_KEYS}
    labels = {k: tf.constant(data[k]) for k in LABEL_KEYS}
    # Build every variable before tracing: a tf.function may not create them later.
    out = backbone({k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    mlm_head(out["sequence_output"], mask_positions=features["mask_positions"])
    sop_head(out["pooled_output"])
    variables = (
        backbone.trainable_variables + mlm_head.trainable_variables + sop_head.trainable_variables
    )
    optimizer = keras.optimizers.Lamb(learning_rate=1e-4, weight_decay=0.01, global_clipnorm=1.0)
    optimizer.build(variables)

    @tf.function(jit_compile=jit_compile)
    def train_step(features, labels):
        with tf.GradientTape() as tape:
            out = backbone(
                {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask")},
                training=True,
            )
            mlm_logits = mlm_head(out["sequence_output"], mask_positions=features["mask_positions"])
            sop_logits = sop_head(out["pooled_output"])
            mlm_losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels["mask_ids"], tf.cast(mlm_logits, tf.float32)
            )
            weights = labels["mask_weights"]
            mlm_loss = tf.reduce_sum(mlm_losses * weights) / tf.reduce_sum(weights)
            sop_loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels["sentence_order_label"], tf.cast(sop_logits, tf.float32)
                )
            )
            loss = mlm_loss + sop_loss
        grads = tape.gradient(loss, variables)
        optimizer.apply(grads, variables)
        return loss

    def step() -> float:
        return float(train_step(features, labels))

    info = {
        "optimizer": "keras.optimizers.Lamb(weight_decay=0.01, global_clipnorm=1.0)",
        "model": "keras_hub AlbertBackbone + keras_hub.layers.MaskedLMHead + Dense(2)",
        "dtype_policy": policy,
        "jit_compile": jit_compile,
        "attention": "keras_hub TransformerEncoder / keras MultiHeadAttention (padding mask)",
    }
    return step, info


# --------------------------------------------------------------------------- Hugging Face
def build_hf_step(
    shape: Shape, precision: str, compile_model: bool, attention: str
) -> tuple[Callable[[], float], dict]:
    """transformers' AlbertForPreTraining, MLM decoded at the masked positions only."""
    import torch
    import torch.nn.functional as F
    import transformers

    torch.manual_seed(0)
    config = transformers.AlbertConfig(
        vocab_size=shape.vocab,
        embedding_size=shape.embed,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_hidden_groups=1,
        inner_group_num=1,
        num_attention_heads=shape.heads,
        intermediate_size=shape.ffn,
        hidden_act="gelu_new",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
        max_position_embeddings=shape.max_position,
        type_vocab_size=shape.type_vocab,
        attn_implementation=attention,
    )
    model = transformers.AlbertForPreTraining(config)
    model.train()
    bf16 = precision == "bfloat16"

    class PretrainingLoss(torch.nn.Module):
        """Forward + loss in one module, so torch.compile sees all of it."""

        def __init__(self, pretraining: torch.nn.Module):
            super().__init__()
            self.pretraining = pretraining

        def forward(self, token_ids, segment_ids, padding_mask, positions, mask_ids, weights, sop):
            m = self.pretraining
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = m.albert(
                    input_ids=token_ids, attention_mask=padding_mask, token_type_ids=segment_ids
                )
                index = positions.unsqueeze(-1).expand(-1, -1, out.last_hidden_state.shape[-1])
                gathered = torch.gather(out.last_hidden_state, 1, index)  # [B, P, H]
                mlm_logits = m.predictions(gathered)
                sop_logits = m.sop_classifier(out.pooler_output)
            mlm = F.cross_entropy(
                mlm_logits.float().flatten(0, 1), mask_ids.flatten(), reduction="none"
            )
            mlm_loss = (mlm * weights.flatten()).sum() / weights.sum()
            return mlm_loss + F.cross_entropy(sop_logits.float(), sop)

    loss_module: Any = PretrainingLoss(model)
    if compile_model:
        loss_module = torch.compile(loss_module)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    data = synthetic_batch(shape)
    token_ids, segment_ids, padding_mask, positions, mask_ids, sop = (
        torch.from_numpy(data[k]).long()
        for k in (*FEATURE_KEYS, "mask_ids", "sentence_order_label")
    )
    weights = torch.from_numpy(data["mask_weights"])

    def step() -> float:
        loss = loss_module(token_ids, segment_ids, padding_mask, positions, mask_ids, weights, sop)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    info = {
        "optimizer": "torch.optim.AdamW(weight_decay=0.01) + clip_grad_norm_ 1.0",
        "model": "transformers AlbertForPreTraining: albert, gather, predictions, sop_classifier",
        "dtype_policy": "autocast bfloat16" if bf16 else "float32",
        "attention": model.config._attn_implementation,
        # transformers drops an all-ones mask unless tracing: eager SDPA then
        # runs unmasked (slightly less work than ours), compiled keeps it.
        "attention_mask": "applied"
        if compile_model or attention != "sdpa"
        else "dropped (all tokens real)",
        "torch_compile": "default mode, forward+loss module" if compile_model else False,
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
    }
    return step, info


# --------------------------------------------------------------------------- matmul peak
def matmul_sizes(smoke: bool) -> list[tuple[int, int, int]]:
    """(m, k, n): square sizes, plus ALBERT-base's FFN matmul (tokens × H × FFN)."""
    if smoke:
        return [(128, 128, 128), (256, 256, 256)]
    return [(1024, 1024, 1024), (2048, 2048, 2048), (3072, 3072, 3072), (2048, 768, 3072)]


def measure_matmul(framework: str, precision: str, smoke: bool, repeats: int = 5) -> dict[str, Any]:
    """Best GFLOP/s of one matmul over a few sizes (best of ``repeats`` each)."""
    if framework == "tf":
        import tensorflow as tf

        dtype = {"float32": tf.float32, "bfloat16": tf.bfloat16}[precision]

        @tf.function
        def mm(a, b):
            # A scalar out: the timing is the matmul, not a copy of its result.
            return tf.linalg.matmul(a, b)[0, 0]

        def make(m: int, k: int, n: int) -> Callable[[], Any]:
            a = tf.cast(tf.random.normal((m, k)), dtype)
            b = tf.cast(tf.random.normal((k, n)), dtype)
            return lambda: mm(a, b).numpy()

    else:
        import torch

        dtype_t = {"float32": torch.float32, "bfloat16": torch.bfloat16}[precision]

        def make(m: int, k: int, n: int) -> Callable[[], Any]:
            a = torch.randn(m, k).to(dtype_t)
            b = torch.randn(k, n).to(dtype_t)
            return lambda: torch.mm(a, b)

    by_size = {}
    for m, k, n in matmul_sizes(smoke):
        run = make(m, k, n)
        run()  # trace / allocate
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
        by_size[f"{m}x{k}x{n}"] = round(2 * m * k * n / best / 1e9, 1)
    return {"gflops_by_size": by_size, "best_gflops": max(by_size.values())}


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
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {**timing, **info, "peak_rss_mb": round(peak_rss / 1024)}


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


def merge_rounds(previous: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """One variant's result over rounds: timed steps pooled, per-round medians kept."""
    if previous is None:
        merged = dict(new)
        merged["round_medians_s"] = [new.get("median_s")]
        return merged
    merged = dict(previous)
    merged["round_medians_s"] = [*previous["round_medians_s"], new.get("median_s")]
    if "times_s" not in new:  # a failed round: keep what the others measured
        merged.setdefault("round_errors", []).append(new.get("error"))
        return merged
    if "times_s" not in previous:
        merged = {**new, "round_medians_s": merged["round_medians_s"]}
        merged["round_errors"] = previous.get("round_errors", []) + [previous.get("error")]
        return merged
    times = previous["times_s"] + new["times_s"]
    others = [
        x
        for x in (previous["other_processes_cpu_fraction"], new["other_processes_cpu_fraction"])
        if x is not None
    ]
    merged.update(
        times_s=times,
        median_s=statistics.median(times),
        min_s=min(times),
        max_s=max(times),
        repeats=len(times),
        other_processes_cpu_fraction=max(others) if others else None,
    )
    return merged


def summarize(report: dict[str, Any]) -> None:
    """Adds MFU, tokens/s and ratios (peer median / ours median) in place."""
    shape = report["shape"]
    flops = report["flops_per_step"]
    peaks = report.get("peak", {})
    for precision, variants in report["results"].items():
        peak = peaks.get(f"peak_{'fp32' if precision == 'float32' else 'bf16'}")
        for r in variants.values():
            if "median_s" not in r:
                continue
            r["tokens_per_s"] = round(shape["batch"] * shape["seq"] / r["median_s"], 1)
            r["achieved_gflops"] = round(flops / r["median_s"] / 1e9, 1)
            r["mfu"] = round(flops / r["median_s"] / (peak * 1e9), 4) if peak else None
        ours = variants.get("ours", {}).get("median_s")
        if not ours:
            continue
        ratios = {
            v: round(r["median_s"] / ours, 3)
            for v, r in variants.items()
            if v != "ours" and "median_s" in r
        }
        peer_ratios = {v: x for v, x in ratios.items() if v in PEERS}
        best = min(peer_ratios, key=peer_ratios.get) if peer_ratios else None
        ours_min = variants["ours"]["min_s"]
        # Fastest step over fastest step: the least disturbed figures.
        min_ratios = {
            v: round(r["min_s"] / ours_min, 3)
            for v, r in variants.items()
            if v != "ours" and "min_s" in r
        }
        peer_min = {v: x for v, x in min_ratios.items() if v in PEERS}
        best_min = min(peer_min, key=peer_min.get) if peer_min else None
        report["ratios_over_ours"][precision] = {
            **ratios,
            "best_peer": best,
            "best_peer_ratio": ratios.get(best) if best else None,
            "by_min_step": min_ratios,
            "best_peer_by_min": best_min,
            "best_peer_ratio_by_min": min_ratios.get(best_min) if best_min else None,
        }


def markdown(report: dict[str, Any]) -> str:
    def fmt(x: float | None, spec: str) -> str:
        return "—" if x is None else format(x, spec)

    lines = [
        f"Shape: {report['shape']}",
        f"Model FLOPs per step: {report['flops_per_step'] / 1e9:.1f} GFLOP "
        f"(3 × forward matmuls); CPU {report['machine']['cpu_model']}, "
        f"{report['machine']['cores']} cores",
        "",
    ]
    peak = report.get("peak", {})
    if peak:
        lines += ["| matmul peak | float32 GFLOP/s | bfloat16 GFLOP/s |", "|---|---|---|"]
        for fw in ("tf", "torch"):
            row = [peak.get(fw, {}).get(p, {}) for p in PRECISIONS]
            cells = [fmt(r.get("best_gflops"), ".1f") if r else "—" for r in row]
            lines.append(f"| {fw} | {' | '.join(cells)} |")
        fp32, bf16 = fmt(peak.get("peak_fp32"), ".1f"), fmt(peak.get("peak_bf16"), ".1f")
        lines.append(f"| **peak** | {fp32} | {bf16} |")
        lines.append("")
    lines += [
        "| precision | variant | median s | min s | max s | tokens/s | GFLOP/s | MFU "
        "| variant/ours (median) | variant/ours (min) | other CPU | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for precision, variants in report["results"].items():
        ratios = report["ratios_over_ours"].get(precision, {})
        for name, r in variants.items():
            if "median_s" not in r:
                error = str(r.get("error", "no result"))[:120].replace("|", "/")
                lines.append(f"| {precision} | {name} | failed: {error} ||||||||||")
                continue
            ratio = 1.0 if name == "ours" else ratios.get(name)
            ratio_min = 1.0 if name == "ours" else ratios.get("by_min_step", {}).get(name)
            note = r.get("attention", "") if name.startswith("hf") else ""
            lines.append(
                f"| {precision} | {name} | {r['median_s']:.3f} | {r['min_s']:.3f} "
                f"| {r['max_s']:.3f} | {r['tokens_per_s']:.0f} | {r['achieved_gflops']:.1f} "
                f"| {fmt(r.get('mfu'), '.1%')} | {fmt(ratio, '.2f')} | {fmt(ratio_min, '.2f')} "
                f"| {fmt(r['other_processes_cpu_fraction'], '.0%')} | {note} |"
            )
    for precision, ratios in report["ratios_over_ours"].items():
        if ratios.get("best_peer"):
            lines.append(
                f"\n{precision}: best peer {ratios['best_peer']} takes "
                f"{ratios['best_peer_ratio']:.2f}× ours' median step time; by fastest step, "
                f"{ratios['best_peer_by_min']} takes {ratios['best_peer_ratio_by_min']:.2f}× "
                "(>1: ours is faster)."
            )
    return "\n".join(lines)


def orchestrate(args: argparse.Namespace) -> None:
    variants = common.choices(args.variants, VARIANTS, "variant")
    precisions = common.choices(args.precisions, PRECISIONS, "precision")
    shape = SMOKE if args.smoke else FULL
    output = args.output or (
        os.path.join(tempfile.gettempdir(), "pretraining_step_smoke.json")
        if args.smoke
        else DEFAULT_OUTPUT
    )
    cores = os.cpu_count() or 1
    report: dict[str, Any] = {
        "what": "seconds per ALBERT pretraining step (MLM at masked positions + SOP, "
        "forward + backward + optimizer), one fixed synthetic batch, input pipeline excluded",
        "command": [os.path.relpath(__file__), *sys.argv[1:]],
        "smoke": args.smoke,
        "shape": dataclasses.asdict(shape),
        "flops_per_step": albert_training_flops(**_flops_args(shape)),
        "forward_flops_by_part": albert_forward_flops(**_flops_args(shape)),
        "machine": machine_info(),
        "threads": {
            **thread_env(cores, args.inter_op_threads, args.omp_wait_policy),
            "tf_intra_op": cores,
            "tf_inter_op": args.inter_op_threads,
            "torch_threads": cores,
            "torch_interop": args.inter_op_threads,
        },
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
