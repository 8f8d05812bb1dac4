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

from albert_tf import kernels
from albert_tf.activations import gelu_new
from albert_tf.layers.layer_norm import AlbertLayerNormalization


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


def test_fused_scope_nests_and_can_switch_off():
    assert not kernels.active()
    with kernels.fused():
        assert kernels.active()
        with kernels.fused(False):
            assert not kernels.active()
        assert kernels.active()
    assert not kernels.active()


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
        np.testing.assert_allclose(got, _layer_norm64(x, ones, zeros, epsilon), atol=1e-5)


def test_layers_switch_to_the_kernels_only_inside_fused():
    layer = AlbertLayerNormalization(epsilon=1e-12)
    x = tf.constant(np.random.RandomState(5).randn(2, 5, 24).astype("float32"))
    layer.build(x.shape)
    layer.gamma.assign(np.linspace(0.5, 1.5, 24))

    def op_types(fn):
        graph = tf.function(fn).get_concrete_function(x).graph
        return {op.type for op in graph.get_operations()}

    assert "AlbertLayerNorm" not in op_types(layer)
    assert "AlbertGeluTanh" not in op_types(gelu_new)
    with kernels.fused():
        assert "AlbertLayerNorm" in op_types(layer)
        assert "AlbertGeluTanh" in op_types(gelu_new)
        fused_y = layer(x)
    np.testing.assert_allclose(fused_y, layer(x), atol=1e-5)
    assert keras.layers.deserialize(keras.layers.serialize(layer)).epsilon == 1e-12


def test_missing_compiler_falls_back_to_stock_ops(tmp_path):
    # A fresh process with an empty cache and no compiler: a warning names the
    # problem, and fused() blocks run the stock ops with the same results.
    code = textwrap.dedent(
        """
        import logging, numpy as np, tensorflow as tf
        logging.basicConfig(level=logging.WARNING)
        from albert_tf import kernels
        from albert_tf.activations import gelu_new
        x = tf.constant(np.linspace(-3, 3, 7), tf.float32)
        with kernels.fused():
            assert not kernels.active()
            y = gelu_new(x)
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
