"""`AlbertLayerNormalization.freeze`: the graph oneDNN fuses, with the layer's own epsilon."""

import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import assert_normwise_close, float32_budget
from helpers.testing_utils import executed_ops, onednn_enabled

from albert_tf.layers.layer_norm import AlbertLayerNormalization


def _layer(epsilon, width=16):
    rng = np.random.RandomState(0)
    layer = AlbertLayerNormalization(epsilon=epsilon)
    layer.build((None, width))
    layer.gamma.assign(rng.rand(width).astype("float32") + 0.5)
    layer.beta.assign(rng.randn(width).astype("float32"))
    return layer


def _numpy_layer_norm(x, gamma, beta, epsilon):
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


@pytest.mark.parametrize("epsilon", [1e-12, 1e-5, 1e-2])
@pytest.mark.parametrize("shape", [(4, 9, 16), (36, 16)])
def test_frozen_layer_norm_keeps_its_epsilon(epsilon, shape):
    layer = _layer(epsilon)
    # A variance of 1e-4 makes epsilon matter: the fused op's own 1e-3 would be far off.
    x = (np.random.RandomState(1).randn(*shape) * 0.01 + 0.3).astype("float32")
    want = _numpy_layer_norm(x, layer.gamma.numpy(), layer.beta.numpy(), epsilon)
    before = layer(x).numpy()
    layer.freeze()
    # in a graph, as a SavedModel runs it: Grappler and oneDNN rewrite it
    after = tf.function(layer)(tf.constant(x)).numpy()
    # Against float64: the mean, the variance and the scaling (depth 3, width 16),
    # with the cancellation of x - mean amplifying errors by |mean| / std = 30.
    rtol = float32_budget(depth=3, width=16, conditioning=30)
    assert_normwise_close(before, want, rtol=rtol, what="layer")
    assert_normwise_close(after, want, rtol=rtol, what="frozen")


@pytest.mark.skipif(not onednn_enabled(), reason="this TensorFlow has no oneDNN rewrites")
@pytest.mark.parametrize("shape", [(4, 9, 16), (36, 16)])
def test_frozen_layer_norm_runs_as_one_onednn_op(shape):
    layer = _layer(1e-12)
    x = tf.constant(np.random.RandomState(1).randn(*shape).astype("float32"))
    unfrozen = executed_ops(tf.function(layer), x)
    assert "_MklLayerNorm" not in unfrozen and "Rsqrt" in unfrozen, sorted(set(unfrozen))
    layer.freeze()
    frozen = executed_ops(tf.function(layer), x)
    assert frozen.count("_MklLayerNorm") == 1, frozen
    assert "Rsqrt" not in frozen and "Mean" not in frozen


def test_freeze_needs_gamma_and_beta():
    layer = AlbertLayerNormalization(epsilon=1e-12, center=False)
    layer.build((None, 8))
    with pytest.raises(ValueError, match="both gamma and beta"):
        layer.freeze()
