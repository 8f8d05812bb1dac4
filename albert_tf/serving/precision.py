"""The numeric precision an exported model serves in: float32, bfloat16 or int8.

`to_serving_precision` rewrites a model into a new one whose transformer
projections run in the chosen precision; the model it is given is unchanged.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import keras
import tensorflow as tf

from albert_tf.hardware import ONEDNN_DTYPE_FLAGS, PRECISION_CPU_FLAGS, cpu_flags, onednn_runs
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.bfloat16_linear import Bfloat16Linear
from albert_tf.layers.dense import AlbertDense
from albert_tf.layers.implementations import model_implementation, set_implementation
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


@dataclasses.dataclass(frozen=True)
class ServingModel:
    """What `to_serving_precision` returns: a new model and what it is made of."""

    #: A new model with the given model's weights; the given model is unchanged.
    model: keras.Model
    #: The modules that now run its projections (a SavedModel of the model's
    #: traced functions saves their variables as captures: `export.signature_root`).
    projections: tuple[tf.Module, ...]
    #: Each block's precision: ``{"attention": ..., "feedforward": ...}``.
    blocks: dict[str, str]


def to_serving_precision(
    model: keras.Model, precision: str, *, int8_attention: str = "auto", copy: bool = True
) -> ServingModel:
    """``model`` rewritten to serve in ``precision``, as a new model.

    The new model is a clone of ``model`` (its own layers, the same weights and
    implementation), with every LayerNorm frozen (`freeze_layer_norms`: one
    fused op each in a served graph) and its transformer projections run by
    new modules (`replace_projections`):

    * float32: the projections as trained.
    * bfloat16: `Bfloat16Linear` everywhere. Only the projections' matmuls are
      rounded; the residual stream, LayerNorm and softmax stay float32. That
      agreed with float32 on 99.7% of parable_zh items, a ``mixed_bfloat16``
      model on 98.4%.
    * int8: `Int8Linear` feed-forward projections. The attention block's
      projections (a third of the projection FLOPs) run in ``int8_attention``:
      ``"bfloat16"``, ``"float32"``, or ``"auto"`` (bfloat16 where this CPU has
      bf16 instructions, else float32). With one input scale per tensor they
      cost the most agreement: on the Chinese demo model, int8 there too
      agreed with float32 on 98.5% of parable_zh items, int8 only in the
      feed-forward block on 99.4%.

    ``model`` itself is left as it was: it still trains, saves and converts.
    ``copy=False`` rewrites ``model`` in place instead, for a model nobody else
    holds (`load_for_serving`'s): an export then needs one copy of the weights,
    not two.

    >>> import numpy as np
    >>> import albert_tf
    >>> from albert_tf.config import AlbertConfig
    >>> config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16,
    ...     num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
    ...     max_position_embeddings=16)
    >>> model = albert_tf.AlbertMultipleChoice.from_albert_config(config)
    >>> served = to_serving_precision(model, "bfloat16")
    >>> served.model is model, len(served.projections), served.blocks["feedforward"]
    (False, 4, 'bfloat16')
    >>> x = {"token_ids": np.full((1, 2, 6), 7, "int32"),
    ...      "segment_ids": np.zeros((1, 2, 6), "int32"),
    ...      "padding_mask": np.ones((1, 2, 6), "int32")}
    >>> before, after = model(x).numpy(), served.model(x).numpy()
    >>> bool(np.abs(before - after).max() < 0.05), bool((before != after).any())
    (True, True)
    """
    check_precision(precision)
    if int8_attention == "auto":
        int8_attention = "bfloat16" if precision_warning("bfloat16") is None else "float32"
    if int8_attention not in ("bfloat16", "float32"):
        raise ValueError(f"int8_attention={int8_attention!r}: use 'bfloat16', 'float32' or 'auto'")
    clone = _clone(model) if copy else model
    freeze_layer_norms(clone)
    if precision == "float32":
        return ServingModel(clone, (), {"attention": "float32", "feedforward": "float32"})
    if precision == "bfloat16":
        made = replace_projections(clone, Bfloat16Linear, attention=Bfloat16Linear)
        return ServingModel(clone, made, {"attention": "bfloat16", "feedforward": "bfloat16"})
    other = Bfloat16Linear if int8_attention == "bfloat16" else None
    made = replace_projections(clone, Int8Linear, attention=other)
    return ServingModel(clone, made, {"attention": int8_attention, "feedforward": "int8"})


def _clone(model: keras.Model) -> keras.Model:
    """A new model of the same class, config, weights and implementation."""
    # From the class's own config: keras.models.clone_model turns a Functional
    # subclass (AlbertBackbone) into a plain Functional model without `config`.
    clone = type(model).from_config(model.get_config())
    if len(clone.weights) != len(model.weights):
        raise ValueError(f"cannot copy {type(model).__name__}: its config does not rebuild it")
    # Variable by variable: no second full copy of the weights in host memory.
    for target, source in zip(clone.weights, model.weights, strict=True):
        target.assign(source)
    name = model_implementation(model)
    if name is not None:
        set_implementation(clone, name)
    return clone


def replace_projections(
    model: keras.Model, feedforward: Projection | None, attention: Projection | None
) -> tuple[tf.Module, ...]:
    """Routes ``model``'s transformer projections through new modules,
    ``make(kernel, bias, name=...)``: ``attention`` makes the attention block's
    two, ``feedforward`` the feed-forward block's; None leaves a block as it is.
    It changes ``model``: `to_serving_precision` calls it on its clone.

    The query/key/value (fused), attention-output and both feed-forward
    projections are all but ~3% of ALBERT-base's FLOPs at 250 tokens;
    embeddings, LayerNorm, softmax, the attention-score products, the pooler
    and the heads are untouched. A layer shared by several positions is
    replaced once, so the served model shares exactly what the trained one
    does. The float weights stay (checkpoints and conversion still see them).
    """
    made: list[tf.Module] = []
    for layer in distinct_layers(model):
        if isinstance(layer, AlbertAttention) and attention is not None:
            qkv = attention(*layer.qkv_weights(fold_scale=False), name="qkv")
            output = attention(*layer.output_weights(), name="output")
            layer.serve_projections_with(qkv=qkv, output=output)
            made += [qkv, output]
        elif isinstance(layer, AlbertDense) and feedforward is not None:
            projection = feedforward(layer.kernel, layer.bias, name=layer.name)
            layer.serve_projection_with(projection)
            made.append(projection)
    if not made:
        raise ValueError("no ALBERT attention or feed-forward layers found to replace")
    return tuple(made)


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
) -> ServingModel:
    """``loader(checkpoint_dir)`` rewritten to serve in ``precision``
    (`to_serving_precision`)."""
    check_precision(precision)
    # The loaded model is ours alone: rewrite it rather than hold two copies.
    return to_serving_precision(loader(checkpoint_dir), precision, copy=False)
