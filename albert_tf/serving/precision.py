"""The numeric precision an exported model serves in: float32, bfloat16 or int8."""

from __future__ import annotations

import os
from collections.abc import Callable

import keras
import tensorflow as tf

from albert_tf.hardware import ONEDNN_DTYPE_FLAGS, PRECISION_CPU_FLAGS, cpu_flags, onednn_runs
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.bfloat16_linear import Bfloat16Linear
from albert_tf.layers.dense import AlbertDense
from albert_tf.layers.int8_linear import Int8Linear
from albert_tf.layers.layer_norm import AlbertLayerNormalization
from albert_tf.layers.walk import distinct_layers

#: What ``--serving_precision`` accepts.
SERVING_PRECISIONS = ("float32", "bfloat16", "int8")
# The CPU features each lower precision needs to be faster than float32 (oneDNN
# dispatches to them): bf16 dot products (Cooper Lake, Zen 4+; AMX on Sapphire
# Rapids+), and int8 dot products (VNNI: Cascade Lake, Zen 4+; AMX). AVX-VNNI alone
# (Alder Lake) is not enough: TensorFlow runs int8 only with AVX-512 or AVX-VNNI-INT8.
FAST_ON = {
    "bfloat16": ("avx512_bf16", "amx_bf16"),
    "int8": ("avx512_vnni", "amx_int8"),
}
#: The CPU flags an export records.
RELEVANT_CPU_FLAGS = frozenset(PRECISION_CPU_FLAGS)


def check_precision(precision: str) -> None:
    if precision not in SERVING_PRECISIONS:
        raise ValueError(f"serving precision {precision!r}: use one of {SERVING_PRECISIONS}")


def precision_warning(precision: str, flags: set[str] | None = None) -> str | None:
    """Why ``precision`` may be slower than float32 on this CPU (None if it should not be).

    >>> precision_warning("bfloat16", flags={"avx2", "avx512_bf16"}) is None
    True
    >>> print(precision_warning("bfloat16", flags={"avx2"}))  # doctest: +ELLIPSIS
    this CPU has none of avx512_bf16, amx_bf16: a bfloat16 model ... slower than float32 ...
    """
    check_precision(precision)
    needed = FAST_ON.get(precision)
    flags = cpu_flags() if flags is None else flags
    if precision == "int8" and not onednn_runs("int8", flags):
        return (
            f"TensorFlow's int8 matmul does not run on this CPU: it needs one of "
            f"{', '.join(ONEDNN_DTYPE_FLAGS['int8'])}. An int8 export made here serves only "
            f"on CPUs that have them (elsewhere every request fails); serve float32 here "
            f"(docs/serving.md, 'Precision')."
        )
    if needed is None or flags & set(needed):
        return None
    return (
        f"this CPU has none of {', '.join(needed)}: a {precision} model converts its "
        f"matmuls in software and is likely slower than float32 here. It is still "
        f"correct, and fast on CPUs that have them (docs/serving.md, 'Precision')."
    )


Projection = Callable[..., tf.Module]


def replace_projections(
    model: keras.Model, feedforward: Projection | None, attention: Projection | None
) -> list[tf.Module]:
    """Routes ``model``'s transformer projections through new modules,
    ``make(kernel, bias, name=...)``: ``attention`` makes the attention block's
    two, ``feedforward`` the feed-forward block's; None leaves a block as it is.

    The query/key/value (fused), attention-output and both feed-forward
    projections are all but ~3% of ALBERT-base's FLOPs at 250 tokens;
    embeddings, LayerNorm, softmax, the attention-score products, the pooler
    and the heads are untouched. A layer shared by several positions is
    replaced once, so the served model shares exactly what the trained one
    does. The float weights stay (checkpoints and conversion still see them).

    Returns the new modules (a SavedModel of the replaced model's traced
    functions saves their variables as captures: `export.signature_root`).
    """
    made: list[tf.Module] = []
    for layer in distinct_layers(model):
        if isinstance(layer, AlbertAttention) and attention is not None:
            layer.serving_projections = {
                "qkv": attention(*layer.qkv_weights(fold_scale=False), name="qkv"),
                "output": attention(*layer.output_weights(), name="output"),
            }
            made += layer.serving_projections.values()
        elif isinstance(layer, AlbertDense) and feedforward is not None:
            layer.serving_projection = feedforward(layer.kernel, layer.bias, name=layer.name)
            made.append(layer.serving_projection)
    if not made:
        raise ValueError("no ALBERT attention or feed-forward layers found to replace")
    return made


def quantize_int8(model: keras.Model, attention: str = "auto") -> tuple[list[tf.Module], str]:
    """The int8 serving model: `Int8Linear` feed-forward projections.

    The attention block's projections (a third of the projection FLOPs) are not
    int8: with one input scale per tensor they cost the most agreement. On the
    Chinese demo model, int8 there too agreed with float32 on 98.5% of
    parable_zh items (int8 in the fused query/key/value projection alone,
    98.8%); int8 only in the feed-forward block, 99.4%. They run in ``attention`` precision:
    ``"bfloat16"`` (`Bfloat16Linear`), ``"float32"``, or ``"auto"``: bfloat16
    where this CPU has bf16 instructions, else float32.

    Returns the new modules and the attention block's precision.
    """
    if attention == "auto":
        attention = "bfloat16" if precision_warning("bfloat16") is None else "float32"
    if attention not in ("bfloat16", "float32"):
        raise ValueError(f"attention={attention!r}: use 'bfloat16', 'float32' or 'auto'")
    other = Bfloat16Linear if attention == "bfloat16" else None
    return replace_projections(model, Int8Linear, attention=other), attention


def cast_bfloat16(model: keras.Model) -> list[tf.Module]:
    """`replace_projections` with `Bfloat16Linear`: bfloat16 matmuls, float32 elsewhere."""
    return replace_projections(model, Bfloat16Linear, attention=Bfloat16Linear)


def freeze_layer_norms(model: keras.Model) -> int:
    """Freezes ``model``'s LayerNorms (`AlbertLayerNormalization.freeze`) so that
    the exported graph runs each as one fused op; returns how many distinct ones."""
    count = 0
    for layer in distinct_layers(model):
        if isinstance(layer, AlbertLayerNormalization):
            layer.freeze()
            count += 1
    return count


def load_for_serving(
    loader: Callable[..., keras.Model],
    checkpoint_dir: str | os.PathLike[str],
    precision: str,
) -> tuple[keras.Model, list[tf.Module], dict[str, str]]:
    """``loader(checkpoint_dir)`` served in ``precision``.

    * float32: the checkpoint as trained.
    * bfloat16: `cast_bfloat16`. Only the projections' matmuls are rounded;
      the residual stream, LayerNorm and softmax stay float32. That agreed with
      float32 on 99.7% of parable_zh items, a ``mixed_bfloat16`` model on 98.4%.
    * int8: `quantize_int8`.

    In every precision the LayerNorms are frozen (`freeze_layer_norms`) and
    attention runs its inference path, which oneDNN fuses
    (`AlbertAttention`); neither changes the arithmetic beyond rounding.

    Returns the model, the projection modules that replaced its float ones,
    and each block's precision.
    """
    check_precision(precision)
    model = loader(checkpoint_dir)
    freeze_layer_norms(model)
    if precision == "float32":
        return model, [], {"attention": "float32", "feedforward": "float32"}
    if precision == "bfloat16":
        return model, cast_bfloat16(model), {"attention": "bfloat16", "feedforward": "bfloat16"}
    made, attention = quantize_int8(model)
    return model, made, {"attention": attention, "feedforward": "int8"}
