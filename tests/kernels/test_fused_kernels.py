"""The fused GELU and LayerNorm kernels against float64 references.

The references are written here from the formulas and differentiated by
TensorFlow's autodiff in float64; the kernels compute in float32 (rounding
once to bfloat16 for bfloat16 tensors).
"""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import assert_normwise_close, float32_budget

from albert_tf import kernels
from albert_tf.activations import gelu_new
from albert_tf.layers.dense import AlbertDense
from albert_tf.layers.implementations import set_implementation
from albert_tf.layers.layer_norm import AlbertLayerNormalization

# A float32 LayerNorm: the mean, the variance and the scaling, over at most 24 values.
LAYER_NORM_BUDGET = float32_budget(depth=3, width=24)


def _bf16_ulp(reference: np.ndarray) -> np.ndarray:
    """Spacing of bfloat16 numbers (8 significant bits) at each value."""
    magnitude = np.maximum(np.abs(reference), np.finfo(np.float32).tiny)
    return 2.0 ** (np.floor(np.log2(magnitude)) - 7)


def _gelu64(x):
    x = tf.cast(x, tf.float64)
    return 0.5 * x * (1 + tf.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _layer_norm64(x, gamma, beta, epsilon):
    x, gamma, beta = (tf.cast(t, tf.float64) for t in (x, gamma, beta))
    mean = tf.reduce_mean(x, -1, keepdims=True)
    variance = tf.reduce_mean(tf.square(x - mean), -1, keepdims=True)
    return (x - mean) / tf.sqrt(variance + epsilon) * gamma + beta


def _value_and_grads(fn, inputs, dy):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        y = fn(*inputs)
    return y, tape.gradient(y, inputs, output_gradients=tf.cast(dy, y.dtype))


def test_kernels_build_and_load_here():
    # CI installs g++; without it the package falls back, but the suite must
    # test the kernels it ships.
    assert kernels.load() is not None
    assert kernels.available()


def test_kernels_take_float32_and_bfloat16_only():
    assert kernels.supports(tf.zeros([2], tf.float32))
    assert kernels.supports(tf.zeros([2], tf.bfloat16))
    assert not kernels.supports(tf.zeros([2], tf.float16))


def test_gelu_float32_value_and_gradient():
    x = tf.constant(np.linspace(-8, 8, 4001).astype("float32"))
    dy = tf.constant(np.random.RandomState(0).randn(4001).astype("float32"))
    y, (dx,) = _value_and_grads(kernels.gelu_tanh, [x], dy)
    y64, (dx64,) = _value_and_grads(_gelu64, [tf.cast(x, tf.float64)], dy)
    assert y.dtype == tf.float32
    np.testing.assert_allclose(y.numpy(), y64.numpy(), atol=2e-6, rtol=0)
    np.testing.assert_allclose(dx.numpy(), dx64.numpy(), atol=2e-5, rtol=0)


def test_gelu_bfloat16_rounds_once():
    x = tf.cast(np.random.RandomState(1).randn(2048).astype("float32") * 3, tf.bfloat16)
    y = kernels.gelu_tanh(x)
    assert y.dtype == tf.bfloat16
    ref = _gelu64(x).numpy()
    err = np.abs(tf.cast(y, tf.float64).numpy() - ref)
    # float32 arithmetic then one rounding: within one bfloat16 step (plus
    # float32's cancellation in 1 + tanh for very negative x, as tf.nn.gelu).
    assert (err <= _bf16_ulp(ref) + 1e-6).all(), (err - _bf16_ulp(ref)).max()


@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_layer_norm_float32_value_and_gradients(offset):
    rng = np.random.RandomState(2)
    x = tf.constant((rng.randn(64, 96) * 3 + offset).astype("float32"))
    gamma = tf.constant(rng.randn(96).astype("float32"))
    beta = tf.constant(rng.randn(96).astype("float32"))
    dy = rng.randn(64, 96).astype("float32")

    def fused(x, gamma, beta):
        return kernels.layer_norm(x, gamma, beta, 1e-6)

    y, grads = _value_and_grads(fused, [x, gamma, beta], dy)
    y64, grads64 = _value_and_grads(
        lambda *a: _layer_norm64(*a, 1e-6), [tf.cast(t, tf.float64) for t in (x, gamma, beta)], dy
    )
    np.testing.assert_allclose(y.numpy(), y64.numpy(), atol=2e-5, rtol=0)
    for name, g, g64 in zip(("dx", "dgamma", "dbeta"), grads, grads64, strict=True):
        scale = np.abs(g64.numpy()).max()
        assert np.abs(g.numpy() - g64.numpy()).max() < 2e-5 * scale, name


def test_layer_norm_bfloat16_input_and_3d_shape():
    rng = np.random.RandomState(3)
    x = tf.cast(rng.randn(4, 16, 48).astype("float32"), tf.bfloat16)
    gamma = tf.constant(rng.randn(48).astype("float32"))
    beta = tf.constant(rng.randn(48).astype("float32"))
    y = kernels.layer_norm(x, gamma, beta, 1e-12)
    assert y.dtype == tf.bfloat16 and y.shape == x.shape
    ref = _layer_norm64(x, gamma, beta, 1e-12).numpy()
    err = np.abs(tf.cast(y, tf.float64).numpy() - ref)
    assert (err <= _bf16_ulp(ref)).all(), err.max()


def test_layer_norm_honours_epsilon():
    x = tf.constant(np.random.RandomState(4).randn(8, 16).astype("float32") * 0.1)
    ones, zeros = tf.ones([16]), tf.zeros([16])
    for epsilon in (1e-12, 1.0):
        got = kernels.layer_norm(x, ones, zeros, epsilon).numpy()
        want = _layer_norm64(x, ones, zeros, epsilon).numpy()
        assert_normwise_close(got, want, rtol=LAYER_NORM_BUDGET, what=f"epsilon {epsilon}")


def test_layers_use_the_kernels_only_under_fused_cpu():
    layer = AlbertLayerNormalization(epsilon=1e-12)
    dense = AlbertDense(24, activation=gelu_new)
    x = tf.constant(np.random.RandomState(5).randn(2, 5, 24).astype("float32"))
    layer.build(x.shape)
    dense.build(x.shape)
    layer.gamma.assign(np.linspace(0.5, 1.5, 24))

    def op_types(fn):
        graph = tf.function(fn).get_concrete_function(x).graph
        return {op.type for op in graph.get_operations()}

    assert "AlbertLayerNorm" not in op_types(layer)
    assert "AlbertGeluTanh" not in op_types(dense)
    stock_y, stock_h = layer(x), dense(x)
    for each in (layer, dense):
        set_implementation(each, "fused_cpu")
    assert "AlbertLayerNorm" in op_types(layer)
    assert "AlbertGeluTanh" in op_types(dense)
    assert_normwise_close(layer(x), stock_y, rtol=LAYER_NORM_BUDGET)
    # One matmul over 24 values, then GELU (a few roundings) on both sides.
    assert_normwise_close(dense(x), stock_h, rtol=float32_budget(depth=4, width=24))
    # The implementation is how it runs, not what it is: no part of its config.
    copy = keras.layers.deserialize(keras.layers.serialize(layer))
    assert copy.epsilon == 1e-12 and copy.implementation.name == "stock"


def test_missing_compiler_falls_back_to_stock_ops(tmp_path):
    # A fresh process with an empty cache and no compiler: a warning names the
    # problem, trainers choose the stock ops, and a model told to use the kernels
    # runs the stock ops with the same results.
    code = textwrap.dedent(
        """
        import logging, numpy as np, tensorflow as tf
        logging.basicConfig(level=logging.WARNING)
        from albert_tf import kernels
        from albert_tf.activations import gelu_new
        from albert_tf.layers.dense import AlbertDense
        from albert_tf.layers.implementations import choose_implementation, set_implementation
        assert choose_implementation(
            accelerator=False, jit_compile=False, fused_kernels=True) == "stock"
        x = tf.constant(np.linspace(-3, 3, 7)[None], tf.float32)
        dense = AlbertDense(7, activation=gelu_new, kernel_initializer="identity")
        set_implementation(dense, "fused_cpu")
        y = dense(x)
        ref = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
        assert np.allclose(y, ref, atol=1e-6)
        try:
            kernels.load()
        except kernels.KernelBuildError as e:
            print("ERROR:", e)
        """
    )
    env = dict(
        os.environ,
        CXX="no-such-compiler-for-albert",
        ALBERT_TF_KERNEL_CACHE=str(tmp_path / "cache"),
        TF_CPP_MIN_LOG_LEVEL="3",
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no C++ compiler 'no-such-compiler-for-albert'" in out.stdout
    assert "fused kernels unavailable" in out.stderr
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())


def _softmax64(scores, mask):
    scores = tf.cast(scores, tf.float64)
    allowed = tf.expand_dims(tf.cast(mask, tf.bool), 1)
    return tf.nn.softmax(tf.where(allowed, scores, tf.constant(-1e9, tf.float64)), axis=-1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("mask_queries", ["per_query", "padding"])
def test_masked_softmax_value_and_gradient(dtype, mask_queries):
    rng = np.random.RandomState(6)
    b, n, s, k = 3, 2, 5, 37  # 37 keys: the vector loop and its scalar tail
    scores = tf.cast(rng.randn(b, n, s, k) * 4, dtype)
    mask = rng.rand(b, s if mask_queries == "per_query" else 1, k) > 0.3
    mask[1, -1, :] = False  # a query allowed nothing: uniform, as the stock path
    mask = tf.constant(mask)
    dy = rng.randn(b, n, s, k).astype("float32")
    probs, (dscores,) = _value_and_grads(lambda x: kernels.masked_softmax(x, mask), [scores], dy)
    ref, (dref,) = _value_and_grads(
        lambda x: _softmax64(x, mask), [tf.cast(scores, tf.float64)], tf.cast(dy, dtype)
    )
    assert probs.dtype == dtype
    got, ref = tf.cast(probs, tf.float64).numpy(), ref.numpy()
    np.testing.assert_allclose(got[1, :, -1], 1 / k, rtol=1e-2)
    if dtype == "float32":
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)
    else:  # float32 inside, one rounding
        assert (np.abs(got - ref) <= _bf16_ulp(ref) + 1e-9).all()
    masked = ~np.broadcast_to(mask.numpy()[:, None], got.shape)
    assert (tf.cast(dscores, tf.float64).numpy()[masked] == 0).all()
    scale = np.abs(dref.numpy()).max()
    limit = 1e-6 if dtype == "float32" else 2e-2
    assert np.abs(tf.cast(dscores, tf.float64).numpy() - dref.numpy()).max() < limit * scale


def test_split_and_merge_heads_are_the_transposes():
    rng = np.random.RandomState(7)
    b, s, n, d = 2, 5, 3, 4
    x = tf.constant(rng.randn(b, s, 2 * n * d).astype("float32"))
    outs = kernels.split_heads(x, 2, n)
    want = tf.unstack(tf.transpose(tf.reshape(x, (b, s, 2, n, d)), (2, 0, 3, 1, 4)))
    for got, ref in zip(outs, want, strict=True):
        np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(kernels.merge_heads(outs), x)
    # Gradients: each is the other op, so a weighted sum checks both ways.
    w = [tf.constant(rng.randn(*o.shape).astype("float32")) for o in outs]
    with tf.GradientTape() as tape:
        tape.watch(x)
        total = sum(
            tf.reduce_sum(o * wi) for o, wi in zip(kernels.split_heads(x, 2, n), w, strict=True)
        )
    np.testing.assert_array_equal(
        tape.gradient(total, x),
        tf.reshape(tf.stack([tf.transpose(wi, (0, 2, 1, 3)) for wi in w], 2), x.shape),
    )


@pytest.mark.parametrize("dtype_policy", ["float32", "mixed_bfloat16"])
def test_attention_layer_fused_matches_stock(dtype_policy):
    from albert_tf.layers.attention import AlbertAttention

    rng = np.random.RandomState(8)
    layer = AlbertAttention(num_heads=4, key_dim=8, dtype=dtype_policy)
    # In the compute dtype, as inside the encoder: a float32 input under
    # mixed_bfloat16 is cast once as query and once as value, and two
    # tensors mean cross-attention (the parent's path).
    x = tf.constant(rng.randn(2, 6, 32), layer.compute_dtype)
    mask = tf.constant(rng.rand(2, 6, 6) > 0.2)
    layer.build(query_shape=x.shape, value_shape=x.shape)

    def run():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.cast(layer(query=x, value=x, attention_mask=mask), tf.float32)
            loss = tf.reduce_sum(y * tf.sin(y))
        return y, tape.gradient(loss, [x, *layer.trainable_variables])

    stock_y, stock_grads = tf.function(run)()
    set_implementation(layer, "fused_cpu")
    fused_fn = tf.function(run)
    ops = {op.type for op in fused_fn.get_concrete_function().graph.get_operations()}
    fused_y, fused_grads = fused_fn()
    assert {"AlbertMaskedSoftmax", "AlbertSplitHeads", "AlbertMergeHeads"} <= ops
    tol = 1e-5 if dtype_policy == "float32" else 3e-2
    np.testing.assert_allclose(fused_y, stock_y, atol=tol * np.abs(stock_y).max())
    # One scale for all: the key bias's gradient is zero up to rounding (a
    # per-query constant shift of the scores leaves the softmax unchanged).
    scale = max(np.abs(s.numpy()).max() for s in stock_grads)
    for f, s in zip(fused_grads, stock_grads, strict=True):
        np.testing.assert_allclose(f, s, atol=tol * scale)
