"""`blocked_attention` against softmax(where(allowed, q kᵀ, -1e9)) v written out here
in float64, forward and gradients, and what its compiled step holds."""

import math

import numpy as np
import pytest
import tensorflow as tf
from helpers.numerics import BFLOAT16_UNIT_ROUNDOFF, assert_normwise_close, float32_budget

from albert_tf.layers.blocked_attention import blocked_attention
from albert_tf.training.compiled_memory import compiled_memory

B, N, D = 2, 3, 8


def _inputs(seq, dtype, seed=0):
    rng = np.random.RandomState(seed)
    q, k, v, upstream = (rng.randn(B, N, seq, D) for _ in range(4))
    q = q / math.sqrt(D)  # the caller folds the scale into q
    return [tf.constant(t, dtype) for t in (q, k, v, upstream)]


def _mask(kind, seq, seed=1):
    """None, or the mask as the layer passes it: [B, 1, 1 or S, S]."""
    rng = np.random.RandomState(seed)
    if kind == "none":
        return None
    if kind == "padding":  # [B, 1, S] → [B, 1, 1, S]: the last keys of row 1 are padding
        lengths = np.array([seq, max(1, seq - 3)])
        return tf.constant((np.arange(seq)[None, :] < lengths[:, None])[:, None, None, :])
    allowed = rng.rand(B, 1, seq, seq) < 0.6
    allowed[:, :, :, 0] = True
    if kind == "empty_row":
        allowed[0, 0, 2, :] = False  # attends uniformly to every key, like the stock path
    return tf.constant(allowed)


def _with_gradients(attend, q, k, v, upstream, allowed):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        out = attend(q, k, v, allowed)
    return [out, *tape.gradient(out, [q, k, v], output_gradients=upstream)]


def _stock(q, k, v, allowed):
    scores = tf.matmul(q, k, transpose_b=True)
    if allowed is not None:
        scores = tf.where(allowed, scores, tf.constant(-1e9, scores.dtype))
    return tf.matmul(tf.nn.softmax(scores, axis=-1), v)


def _reference(q, k, v, upstream, allowed):
    """The stock arithmetic in float64 on the same (rounded) inputs."""
    return [
        t.numpy()
        for t in _with_gradients(
            _stock, *(tf.cast(t, tf.float64) for t in (q, k, v, upstream)), allowed
        )
    ]


def _blocked(block_size):
    return lambda q, k, v, allowed: blocked_attention(q, k, v, allowed, block_size=block_size)


NAMES = ("context", "dq", "dk", "dv")
MASKS = ("none", "padding", "full", "empty_row")
# (S, block): a multiple of the block, not one, and one block (block ≥ S).
SHAPES = ((8, 4), (10, 4), (10, 16))


@pytest.mark.parametrize("seq, block", SHAPES)
@pytest.mark.parametrize("mask", MASKS)
def test_float64_is_the_stock_arithmetic(mask, seq, block):
    q, k, v, upstream = _inputs(seq, tf.float64)
    allowed = _mask(mask, seq)
    ours = _with_gradients(_blocked(block), q, k, v, upstream, allowed)
    for name, got, want in zip(NAMES, ours, _reference(q, k, v, upstream, allowed), strict=True):
        assert got.dtype == tf.float64
        assert_normwise_close(got, want, rtol=1e-10, what=name)


def test_a_row_with_no_allowed_key_is_uniform_with_no_score_gradient():
    q, k, v, upstream = _inputs(10, tf.float32)
    allowed = _mask("empty_row", 10)
    out = blocked_attention(q, k, v, allowed, block_size=4)
    np.testing.assert_allclose(out[0, :, 2], tf.reduce_mean(v[0], axis=1), rtol=1e-5, atol=1e-6)
    # The row's probabilities do not depend on its query: dQ is zero there.
    _, d_q, _, _ = _with_gradients(_blocked(4), q, k, v, upstream, allowed)
    assert np.all(d_q[0, :, 2].numpy() == 0)


@pytest.mark.parametrize("seq, block", SHAPES)
@pytest.mark.parametrize("mask", ("padding", "empty_row"))
def test_float32_within_its_rounding(mask, seq, block):
    q, k, v, upstream = _inputs(seq, tf.float32)
    allowed = _mask(mask, seq)
    ours = _with_gradients(_blocked(block), q, k, v, upstream, allowed)
    # Forward: scores (over D), softmax, context (over S): two chained reductions.
    # Backward: dP = dO Vᵀ (over D), then dS and dQ = dS K / dK = dSᵀ Q (over S),
    # after the forward's two: four.
    width = max(seq, D)
    budgets = [float32_budget(depth=2, width=width)] + [float32_budget(depth=4, width=width)] * 3
    want = _reference(q, k, v, upstream, allowed)
    for name, got, expected, rtol in zip(NAMES, ours, want, budgets, strict=True):
        assert got.dtype == tf.float32
        assert_normwise_close(got, expected, rtol=rtol, what=name)


def test_bfloat16_within_its_rounding():
    seq = 12
    q, k, v, upstream = _inputs(seq, tf.bfloat16)
    allowed = _mask("padding", seq)
    ours = _with_gradients(_blocked(5), q, k, v, upstream, allowed)
    want = _reference(q, k, v, upstream, allowed)
    u = BFLOAT16_UNIT_ROUNDOFF
    # Forward, in bfloat16: each score is rounded (|δs| ≤ u·|s|, which moves a
    # probability by ≤ 2u·max|s| of itself through the exponential and the
    # normalisation), each unnormalised probability (u), each block's context
    # (u of that block's share) and the output (u): the sums in between run in
    # float32, 2¹⁶ times finer. So |δO| ≤ u·(2·max|s| + 3)·max|v|, normwise over
    # max|O|; twice that for the second-order terms.
    scores = np.abs(np.einsum("bnsd,bntd->bnst", *(tf.cast(t, tf.float64) for t in (q, k))))
    v_max, out_max = np.abs(tf.cast(v, tf.float64)).max(), np.abs(want[0]).max()
    forward = 2 * u * (2 * scores.max() + 3) * v_max / out_max
    # Gradients: the same roundings of the recomputed probabilities, then dP, dS and
    # the result each rounded once more, each step amplified by the softmax's
    # Jacobian: float32_budget's form with bfloat16's unit roundoff and no
    # reduction-length term (the matmuls accumulate in float32).
    backward = 2 * 4 * 5 * u
    for name, got, expected, rtol in zip(
        NAMES, ours, want, [forward] + [backward] * 3, strict=True
    ):
        assert got.dtype == tf.bfloat16
        assert_normwise_close(got, expected, rtol=rtol, what=name)


def test_float16_keeps_its_dtype_and_agrees():
    q, k, v, upstream = _inputs(10, tf.float16)
    out = blocked_attention(q, k, v, _mask("full", 10), block_size=4)
    assert out.dtype == tf.float16
    want = _reference(q, k, v, upstream, _mask("full", 10))[0]
    # float16's unit roundoff is 2⁻¹¹: the bfloat16 derivation, 8 times finer.
    assert_normwise_close(out, want, rtol=0.05, what="context")


def _compiled_and_eager(fn, *args, **function_kwargs):
    eager = [t.numpy() for t in fn(*args)]
    compiled = [t.numpy() for t in tf.function(fn, **function_kwargs)(*args)]
    return eager, compiled


@pytest.mark.parametrize("seq, block", ((10, 4), (8, 4)))
def test_xla_gives_the_eager_answer(seq, block):
    q, k, v, upstream = _inputs(seq, tf.float32)
    allowed = _mask("full", seq)

    def step(q, k, v, upstream, allowed):
        return _with_gradients(_blocked(block), q, k, v, upstream, allowed)

    eager, compiled = _compiled_and_eager(step, q, k, v, upstream, allowed, jit_compile=True)
    # Two float32 evaluations of one function (XLA fuses and reorders).
    rtol = float32_budget(depth=4, width=max(seq, D))
    for name, got, want in zip(NAMES, compiled, eager, strict=True):
        assert_normwise_close(got, want, rtol=rtol, what=name)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_shapes_unknown_at_trace_time(jit_compile):
    # Batch, heads and length unknown when traced: the length-bucketed batches of
    # fine-tuning. The keys are padded to whole blocks inside.
    seq = 10
    q, k, v, upstream = _inputs(seq, tf.float64)
    allowed = _mask("empty_row", seq)
    spec = tf.TensorSpec([None, None, None, D], tf.float64)
    mask_spec = tf.TensorSpec([None, 1, None, None], tf.bool)
    step = tf.function(
        lambda q, k, v, upstream, allowed: _with_gradients(_blocked(4), q, k, v, upstream, allowed),
        input_signature=[spec] * 4 + [mask_spec],
        jit_compile=jit_compile,
    )
    want = _reference(q, k, v, upstream, allowed)
    for name, got, expected in zip(NAMES, step(q, k, v, upstream, allowed), want, strict=True):
        assert_normwise_close(got, expected, rtol=1e-10, what=name)


def test_inside_a_distribution_strategy_replica():
    q, k, v, upstream = _inputs(10, tf.float32)
    allowed = _mask("padding", 10)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])

    @tf.function(jit_compile=False)
    def replicated(q, k, v, upstream, allowed):
        def step(q, k, v, upstream, allowed):
            return _with_gradients(_blocked(4), q, k, v, upstream, allowed)

        return strategy.run(step, args=(q, k, v, upstream, allowed))

    with strategy.scope():
        got = replicated(q, k, v, upstream, allowed)
    want = _with_gradients(_blocked(4), q, k, v, upstream, allowed)
    for name, a, b in zip(NAMES, got, want, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_backward_does_not_hold_the_scores():
    # XLA's plan for forward + backward at S = 1024: the stock arithmetic holds
    # [B, N, S, S] float32 tensors (scores, probabilities, their gradient); the
    # blocked one only [B, N, S, block] blocks, one loop iteration at a time.
    batch, heads, seq, dim, block = 1, 2, 1024, 16, 128
    spec = tf.TensorSpec([batch, heads, seq, dim], tf.float32)
    mask = tf.TensorSpec([batch, 1, 1, seq], tf.bool)

    def gradients_of(attend):
        return lambda q, k, v, upstream, allowed: _with_gradients(
            attend, q, k, v, upstream, allowed
        )[1:]

    square = batch * heads * seq * seq * 4
    stock = compiled_memory(gradients_of(_stock), spec, spec, spec, spec, mask)
    blocked = compiled_memory(gradients_of(_blocked(block)), spec, spec, spec, spec, mask)
    assert stock.largest_temporary_bytes == square  # the measure sees the stock's scores
    assert stock.temp_bytes >= 2 * square
    assert blocked.largest_temporary_bytes <= batch * heads * seq * block * 4
    assert blocked.temp_bytes < square / 2, blocked
