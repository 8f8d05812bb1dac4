"""The named implementations: one function, four ways of computing it, chosen once.

Each is checked against the same weights run in float64 with stock ops, forward and
gradients, within float32's budget for the depth; and each is checked to run the ops it
says it runs (the fused kernels, ``where`` masks or added masks)."""

import collections

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import albert_budget, assert_normwise_close
from helpers.testing_utils import TWO_LAYERS, random_batch, tiny_config

from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.implementations import (
    IMPLEMENTATIONS,
    choose_implementation,
    implementation,
    model_implementation,
    set_implementation,
)
from albert_tf.models.backbone import AlbertBackbone

CONFIG = tiny_config(
    **TWO_LAYERS,
    hidden_act="gelu_new",
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
SEQ = 20


def _loss_and_grads(model, batch, training):
    with tf.GradientTape() as tape:
        out = model(batch, training=training)
        y = tf.cast(out["sequence_output"], tf.float64)
        loss = tf.reduce_sum(y * tf.sin(y)) + tf.reduce_sum(tf.cast(out["pooled_output"], y.dtype))
    grads = tape.gradient(loss, model.trainable_variables)
    return y, [tf.cast(tf.convert_to_tensor(g), tf.float64) for g in grads]


@pytest.fixture(scope="module")
def models():
    keras.utils.set_random_seed(3)
    model = AlbertBackbone(CONFIG)
    batch = random_batch(CONFIG.vocab_size, seq=SEQ)
    model(batch)
    reference = AlbertBackbone(CONFIG, dtype="float64")
    reference(batch)
    reference.set_weights([w.astype("float64") for w in model.get_weights()])
    return model, reference, batch


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_each_implementation_computes_the_float64_function(models, name, training):
    model, reference, batch = models
    want_y, want_grads = _loss_and_grads(reference, batch, training)
    set_implementation(model, name)
    step = tf.function(lambda: _loss_and_grads(model, batch, training), jit_compile=name == "xla")
    y, grads = step()
    budget = albert_budget(CONFIG, SEQ)
    assert_normwise_close(y, want_y, rtol=budget, what=f"{name} output")
    # The backward pass is about twice as deep as the forward. One scale for all
    # gradients: the key bias's is zero but for rounding (a constant shift of a
    # query's scores leaves its softmax unchanged), so its own scale is noise.
    scale = max(float(np.abs(g).max()) for g in want_grads)
    for got, want, v in zip(grads, want_grads, model.trainable_variables, strict=True):
        diff = float(np.abs(got - want).max())
        assert diff <= 2 * budget * scale, (name, v.path, diff / scale, 2 * budget)


def _op_counts(model, batch, training) -> collections.Counter:
    """Op types of the forward pass's graph, counted."""
    graph = tf.function(lambda: model(batch, training=training)).get_concrete_function().graph
    return collections.Counter(op.type for op in graph.get_operations())


def test_each_implementation_runs_its_own_ops(models):
    model, _, batch = models
    kernels = {"AlbertGeluTanh", "AlbertLayerNorm", "AlbertMaskedSoftmax", "AlbertSplitHeads"}
    ops = {}
    for name in IMPLEMENTATIONS:
        set_implementation(model, name)
        ops[name] = {t: _op_counts(model, batch, t) for t in (False, True)}
    for training in (False, True):
        assert kernels <= set(ops["fused_cpu"][training])
        assert not ops["fused_cpu"][training]["Softmax"]
        for name in ("stock", "xla", "serving"):
            assert not {op for op in ops[name][training] if op.startswith("Albert")}, name
    # The training form masks each layer's scores with `where` (one SelectV2 more per
    # layer); the inference form adds the mask.
    inference = ops["serving"][True]["SelectV2"]
    assert ops["serving"][False]["SelectV2"] == ops["stock"][False]["SelectV2"] == inference
    training_form = inference + CONFIG.num_hidden_layers
    assert ops["stock"][True]["SelectV2"] == training_form
    assert ops["xla"][False]["SelectV2"] == ops["xla"][True]["SelectV2"] == training_form


def test_a_model_holds_one_implementation_shared_layers_included():
    model = AlbertBackbone(tiny_config(share="all"))
    model(random_batch(120))
    attention = [x for x in model._flatten_layers() if isinstance(x, AlbertAttention)]
    assert len({id(x) for x in attention}) == 1  # shared: one layer, called four times
    assert model_implementation(model) == "stock"
    set_implementation(model, "fused_cpu")
    assert {x.implementation.name for x in attention} == {"fused_cpu"}
    with implementation(model, "serving"):
        assert model_implementation(model) == "serving"
    assert model_implementation(model) == "fused_cpu"
    with pytest.raises(ValueError, match=r"unknown implementation 'flash'.*'fused_cpu'"):
        set_implementation(model, "flash")
    with pytest.raises(ValueError, match="no layers with implementations"):
        set_implementation(keras.Sequential([keras.layers.Dense(2)]), "stock")


@pytest.mark.parametrize(
    "accelerator, jit_compile, fused_kernels, expected",
    [
        (False, False, True, "fused_cpu"),  # this CPU builds the kernels (the suite checks)
        (False, False, False, "stock"),
        (False, True, True, "xla"),  # XLA cannot compile custom ops
        (True, False, True, "stock"),  # CPU kernels: not on a GPU
        (True, True, True, "xla"),
    ],
)
def test_the_trainers_choice(accelerator, jit_compile, fused_kernels, expected):
    chosen = choose_implementation(
        accelerator=accelerator, jit_compile=jit_compile, fused_kernels=fused_kernels
    )
    assert chosen == expected
