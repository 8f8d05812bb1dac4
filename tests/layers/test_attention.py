"""`AlbertAttention`'s fast path against Keras' own MultiHeadAttention path."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import assert_normwise_close, float32_budget
from helpers.testing_utils import executed_ops, onednn_enabled

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


# float32: the q/k/v, score, context and output reductions forward (depth 4, the
# longest 32), twice that backward; bfloat16 rounds every product to 8 bits.
FORWARD = float32_budget(depth=4, width=32)
BACKWARD = float32_budget(depth=8, width=32)


@pytest.mark.parametrize("dtype,atol", [(None, BACKWARD), ("mixed_bfloat16", 0.1)])
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


def test_inference_path_equals_training_path():
    # Inference scales the query and adds the mask (for oneDNN's fused score
    # matmul); training folds the scale into the weights. Same function.
    layer, x, mask = _layer_and_inputs()
    key_padding = mask[:, :1, :]  # [B, 1, S]: what the encoder passes
    for m in (mask, key_padding):
        inference = layer(query=x, value=x, attention_mask=m, training=False).numpy()
        training = layer(query=x, value=x, attention_mask=m, training=True).numpy()
        assert_normwise_close(inference, training, rtol=FORWARD)
    # padding only hides keys: the rows of real queries agree across the two masks
    full = layer(query=x, value=x, attention_mask=mask, training=False).numpy()
    keys = layer(query=x, value=x, attention_mask=key_padding, training=False).numpy()
    assert_normwise_close(full[2, :4], keys[2, :4], rtol=FORWARD)


@pytest.mark.skipif(not onednn_enabled(), reason="this TensorFlow has no oneDNN rewrites")
def test_inference_scores_run_as_one_fused_onednn_matmul():
    layer, x, mask = _layer_and_inputs()
    key_padding = mask[:, :1, :]  # [B, 1, S]

    def ops_of(training):
        call = tf.function(
            lambda t, m: layer(query=t, value=t, attention_mask=m, training=training)
        )
        return executed_ops(call, x, key_padding)

    inference = ops_of(False)
    # scale, scores and mask in one op; the weighted sum stays a plain batch matmul
    assert inference.count("_MklFusedBatchMatMulV2") == 1, inference
    assert "SelectV2" not in inference
    assert "_MklFusedBatchMatMulV2" not in ops_of(True)
