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


def _gelu_tanh_float64(x):
    """Value and derivative in float64, from the formula (independent of TensorFlow)."""
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    value = 0.5 * x * (1 + t)
    slope = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * c * (1 + 3 * 0.044715 * x**2)
    return value, slope


def test_gelu_new_gradient_is_finite_in_float16_where_x_squared_overflows():
    # x² exceeds float16's largest value (65504) from |x| = 256: a mixed_float16 run's
    # FFN pre-activations reach that when training diverges, and the gradient
    # (1 − t²)·slope = 0·inf was NaN, which loss scaling cannot fix.
    points = np.array(
        [-60000, -300, -256, -255, -20, -3, -0.5, 0, 0.5, 3, 20, 255, 256, 300, 60000], np.float64
    )
    x = tf.constant(points, tf.float16)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = gelu_new(x)
    grad = tape.gradient(y, x)
    value, slope = _gelu_tanh_float64(np.clip(points, -50, 50))
    value = np.where(np.abs(points) > 50, np.maximum(points, 0), value)
    # float16 rounds each of the ~8 operations to 2⁻¹¹ relative.
    for ours, expected in ((y, value), (grad, slope)):
        ours = np.asarray(tf.cast(ours, tf.float64))
        assert np.isfinite(ours).all()
        np.testing.assert_allclose(ours, expected, rtol=8 * 2**-11, atol=8 * 2**-11)


def test_the_float16_guard_changes_no_float32_result():
    # The clip inside the tanh acts only where tanh is already ±1 in float32.
    x = tf.constant(np.linspace(-300, 300, 60001), tf.float32)
    c = np.sqrt(2 / np.pi)  # constants folded in float64, as the layer does
    with tf.GradientTape() as tape:
        tape.watch(x)
        ours = gelu_new(x)
    t = tf.tanh(x * (c + (c * 0.044715) * tf.square(x)))
    unclipped = 0.5 * x + 0.5 * x * t
    np.testing.assert_array_equal(ours.numpy(), unclipped.numpy())
    slope = c + (3.0 * c * 0.044715) * tf.square(x)
    unclipped_grad = 0.5 + 0.5 * t + 0.5 * x * (1.0 - tf.square(t)) * slope
    np.testing.assert_array_equal(tape.gradient(ours, x).numpy(), unclipped_grad.numpy())
