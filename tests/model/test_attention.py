"""`AlbertAttention`'s fast path against Keras' own MultiHeadAttention path."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers.attention import AlbertAttention


def _layer_and_inputs(dtype=None):
    keras.utils.set_random_seed(0)
    layer = AlbertAttention(num_heads=4, key_dim=8, dtype=dtype)
    rng = np.random.RandomState(1)
    x = rng.randn(3, 10, 32).astype("float32")
    padding = np.ones((3, 10), bool)
    padding[1, 7:] = padding[2, 4:] = False
    mask = padding[:, None, :] & padding[:, :, None]  # [B, S(query), S(key)]
    layer(query=x, value=x, attention_mask=mask)
    # Random biases: zero-initialised ones would hide a bias mapping mistake.
    for w in layer.weights:
        w.assign(rng.randn(*w.shape).astype("float32") * 0.3)
    return layer, tf.constant(x), tf.constant(mask)


def _forward_and_grads(call, layer, x):
    weights = tf.constant(np.random.RandomState(2).randn(*x.shape).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = tf.cast(call(x), tf.float32)
        loss = tf.reduce_sum(out * weights)  # every output element counts differently
    grads = tape.gradient(loss, [x, *layer.trainable_weights])
    return out.numpy(), [tf.convert_to_tensor(g).numpy() for g in grads]


@pytest.mark.parametrize("dtype,atol", [(None, 2e-5), ("mixed_bfloat16", 0.1)])
def test_fast_path_matches_keras_path_forward_and_gradients(dtype, atol):
    layer, x, mask = _layer_and_inputs(dtype)
    fast_out, fast_grads = _forward_and_grads(
        lambda t: layer(query=t, value=t, attention_mask=mask), layer, x
    )
    keras_out, keras_grads = _forward_and_grads(
        lambda t: keras.layers.MultiHeadAttention.call(
            layer, query=t, value=t, attention_mask=mask
        ),
        layer,
        x,
    )
    assert np.abs(fast_out - keras_out).max() <= atol * max(1.0, np.abs(keras_out).max())
    for fast, ref in zip(fast_grads, keras_grads, strict=True):
        scale = max(1.0, np.abs(ref).max())
        assert np.abs(fast - ref).max() <= atol * scale


def test_other_calls_fall_back_to_keras():
    layer, x, mask = _layer_and_inputs()
    out, scores = layer(query=x, value=x, attention_mask=mask, return_attention_scores=True)
    assert tuple(scores.shape) == (3, 4, 10, 10)
    # Masked keys get no weight, on both paths.
    assert float(tf.reduce_max(scores[2, :, :, 4:])) < 1e-6
    other = tf.reverse(x, axis=[1])
    cross = layer(query=x, value=other)  # cross-attention: the parent's path
    ref = keras.layers.MultiHeadAttention.call(layer, query=x, value=other)
    np.testing.assert_allclose(cross, ref, atol=1e-6)
