"""The hand-written tanh-GELU against Keras' own, value and gradient."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.activations import gelu_new


@pytest.mark.parametrize("dtype,atol", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_gelu_new_value_and_gradient_match_keras(dtype, atol):
    x = tf.constant(np.linspace(-8, 8, 4001), dtype)
    dy = tf.constant(np.cos(np.arange(4001)), dtype)  # a different weight per element

    def value_and_grad(fn):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return [np.asarray(tf.cast(t, tf.float64)) for t in (y, tape.gradient(y, x, dy))]

    ours = value_and_grad(gelu_new)
    reference = value_and_grad(lambda t: keras.activations.gelu(t, approximate=True))
    for a, b in zip(ours, reference, strict=True):
        assert np.abs(a - b).max() <= atol * max(1.0, np.abs(b).max())
