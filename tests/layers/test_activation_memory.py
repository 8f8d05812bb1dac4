"""What the backward pass keeps: bfloat16 attention probabilities, a GELU recomputed
from its input, whole layers recomputed (``--recompute=layer``).

Each is checked for the function it computes (forward and gradients against the
path it replaces, within a tolerance from the arithmetic) here, and the GELU's saving
on a small compiled program; the memory of the whole step is measured in
`tests/training/test_memory_plan.py` and `bench/activation_memory.py`."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import BFLOAT16_UNIT_ROUNDOFF, albert_budget, assert_normwise_close
from helpers.testing_utils import random_batch, tiny_config

from albert_tf.activations import gelu_new, gelu_new_recomputed
from albert_tf.layers.attention import softmax_kept_as
from albert_tf.layers.encoder import set_recompute
from albert_tf.models.backbone import AlbertBackbone

SEQ = 16


def test_bfloat16_probabilities_give_softmax_gradient_within_their_rounding():
    rng = np.random.RandomState(0)
    scores = tf.constant(3 * rng.randn(2, 3, 8, 8), tf.float32)
    upstream = tf.cast(tf.constant(rng.randn(2, 3, 8, 8), tf.float32), tf.bfloat16)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        probs = softmax_kept_as(scores, tf.bfloat16)
    ours = tape.gradient(probs, scores, output_gradients=upstream).numpy().astype(np.float64)
    assert probs.dtype == tf.bfloat16

    p = tf.nn.softmax(tf.cast(scores, tf.float64)).numpy()
    dp = tf.cast(upstream, tf.float64).numpy()
    want = p * (dp - (dp * p).sum(-1, keepdims=True))
    # p is rounded to bfloat16 once (relative u): the product p·(dp − c) moves by
    # u·p·|dp − c| and c = Σ dp·p by at most u·max|dp|, so the gradient by at most
    # 3·u·p·max|dp| (the float32 arithmetic around it is 2¹⁶ times finer).
    bound = 3 * BFLOAT16_UNIT_ROUNDOFF * p * np.abs(dp).max(-1, keepdims=True) + 1e-6
    assert np.all(np.abs(ours - want) <= bound), np.max(np.abs(ours - want) / bound)
    # The bound is tight enough to see a defect: dropping the Σ dp·p term.
    wrong = p * dp
    assert not np.all(np.abs(wrong - want) <= bound)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_recomputed_gelu_is_gelu_with_its_gradient(dtype):
    x = tf.constant(np.concatenate([np.linspace(-12, 12, 97), [-300.0, 300.0]]), dtype)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        kept, recomputed = gelu_new(x), gelu_new_recomputed(x)
    # The same operations in the same order: equal to the last bit.
    np.testing.assert_array_equal(kept.numpy(), recomputed.numpy())
    grad = tape.gradient(recomputed, x).numpy()
    np.testing.assert_array_equal(tape.gradient(kept, x).numpy(), grad)
    assert np.all(np.isfinite(grad))  # |x| ≥ 256 squares to inf in float16 unclipped


def _gelu_and_gradient(activation, x):
    @tf.function(jit_compile=True)
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = activation(x)
        return y, tape.gradient(y, x)

    return [t.numpy() for t in step(x)]


def test_recomputed_gelu_under_xla_is_gelu_with_its_gradient():
    # The optimisation barrier is an identity: XLA runs the same float32 operations on
    # the same inputs either way (float32 has no excess precision to keep or drop).
    x = tf.constant(np.concatenate([np.linspace(-12, 12, 1025), [-300.0, 300.0]]), tf.float32)
    kept, recomputed = _gelu_and_gradient(gelu_new, x), _gelu_and_gradient(gelu_new_recomputed, x)
    np.testing.assert_array_equal(recomputed[0], kept[0])
    np.testing.assert_array_equal(recomputed[1], kept[1])


def test_recomputed_gelu_keeps_its_input_only_under_xla():
    from albert_tf.training.compiled_memory import compiled_memory

    rows, width = 256, 1024

    def step(activation):
        # Matmuls on both sides, as in the feed-forward block: XLA cannot fuse the
        # backward's elementwise work into the forward's, so whatever the GELU's
        # gradient reads is kept across the second matmul.
        def run(x, w):
            with tf.GradientTape() as tape:
                tape.watch([x, w])
                z = tf.matmul(activation(tf.matmul(x, w)), w, transpose_b=True)
                loss = tf.reduce_sum(z * z)
            return tape.gradient(loss, [x, w])

        return run

    x, w = tf.TensorSpec([rows, rows], tf.bfloat16), tf.TensorSpec([rows, width], tf.bfloat16)
    kept = compiled_memory(step(gelu_new), x, w).temp_bytes
    recomputed = compiled_memory(step(gelu_new_recomputed), x, w).temp_bytes
    # gelu_new keeps x² and tanh besides ½x (three [rows, width] bfloat16 tensors); the
    # recomputed one keeps its input alone. Without the barrier XLA merged the
    # recomputation with the forward's and kept all three (the same bytes as gelu_new).
    assert recomputed <= kept - 2 * rows * width * 2, (kept, recomputed)


def _model(**overrides):
    keras.utils.set_random_seed(7)
    fields = dict(num_hidden_layers=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config = tiny_config(**{**fields, **overrides})
    model = AlbertBackbone(config)
    return model, config


def _grads(model, batch):
    with tf.GradientTape() as tape:
        out = model(batch, training=True)
        y = out["sequence_output"]
        loss = tf.reduce_sum(y * tf.sin(y)) + tf.reduce_sum(out["pooled_output"])
    return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]


@pytest.mark.parametrize("share", ["all", "attention", "none"])
def test_layer_recompute_keeps_the_gradients(share):
    model, config = _model(share=share) if share != "all" else _model()
    batch = random_batch(config.vocab_size, seq=SEQ)
    kept = _grads(model, batch)
    set_recompute(model, "layer")
    recomputed = _grads(model, batch)
    assert len(kept) == len(recomputed) == len(model.trainable_variables)
    # The recomputed forward pass runs the same ops on the same inputs; what may
    # differ is only the order in which the applications' gradients add up.
    rtol = albert_budget(config, SEQ)
    for variable, a, b in zip(model.trainable_variables, kept, recomputed, strict=True):
        assert_normwise_close(b, a, rtol=rtol, what=variable.path)


def test_layer_recompute_is_in_the_gradient_graph_and_off_in_inference():
    model, config = _model()
    batch = random_batch(config.vocab_size, seq=SEQ)

    def custom_gradients(training):
        @tf.function
        def step(batch):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(batch, training=training)["sequence_output"])
            return tape.gradient(loss, model.trainable_variables)

        graph = step.get_concrete_function(batch).graph
        return sum(op.type == "IdentityN" for op in graph.get_operations())

    plain = custom_gradients(True), custom_gradients(False)
    set_recompute(model, "layer")
    # At least one more custom gradient (tf.recompute_grad's) per applied layer (the
    # recomputed forward pass adds its own inner ones), in training only.
    assert custom_gradients(True) >= plain[0] + config.num_hidden_layers
    assert custom_gradients(False) == plain[1]


def test_layer_recompute_refuses_dropout():
    keras.utils.set_random_seed(0)
    model = AlbertBackbone(tiny_config(hidden_dropout_prob=0.1))
    with pytest.raises(ValueError, match="without dropout.*hidden_dropout_prob=0.1"):
        set_recompute(model, "layer")
    with pytest.raises(ValueError, match="recompute must be one of"):
        set_recompute(model, "everything")
    set_recompute(model, "none")  # always allowed


def test_xla_implementation_takes_key_blocks_from_512_with_the_same_function():
    from albert_tf.layers.attention import BLOCKED_FROM
    from albert_tf.layers.implementations import set_implementation

    model, config = _model(max_position_embeddings=BLOCKED_FROM, num_hidden_layers=2)
    batch = random_batch(config.vocab_size, batch=2, seq=BLOCKED_FROM)

    def run(name):
        set_implementation(model, name)
        fn = tf.function(lambda b: (model(b, training=True)["sequence_output"], _grads(model, b)))
        graph = fn.get_concrete_function(batch).graph
        loops = sum(
            op.type == "While" or op.type == "StatelessWhile" for op in graph.get_operations()
        )
        return fn(batch), loops

    (want_y, want_grads), stock_loops = run("stock")
    (y, grads), xla_loops = run("xla")
    assert stock_loops == 0 and xla_loops > 0  # the key-block loop is taken
    rtol = albert_budget(config, BLOCKED_FROM)
    assert_normwise_close(y, want_y, rtol=rtol, what="sequence_output")
    # Normwise over all gradients together: the key bias's is zero but for rounding
    # (softmax ignores a constant added to a row), so it has no scale of its own.
    flat = lambda gs: np.concatenate([np.ravel(g) for g in gs])  # noqa: E731
    assert_normwise_close(flat(grads), flat(want_grads), rtol=rtol, what="gradients")
