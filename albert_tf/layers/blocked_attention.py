"""Attention by key blocks: softmax(q kᵀ) v without the [B, heads, S, S] scores.

Why: the stock path (`albert_tf.layers.attention.AlbertAttention`) materialises the
scores and the probabilities, B·N·S² numbers each, and its backward keeps the
probabilities: at S = 2048 with 12 heads that is 200 MB a layer application in
float32, more than everything else a layer keeps. Here the keys are taken
``block_size`` at a time, flash-attention style (Dao et al. 2022): a running maximum
``m`` and sum ``total`` per query row rescale what earlier blocks added, so only one
[B, N, S, block] block of scores exists at a time. The backward recomputes each
block's probabilities from q, k and the saved per-row log-sum-exp instead of keeping
them; what it keeps is q, k, v, the output and each row's log-sum-exp, as its two
terms: the maximum and the log of the sum, [B, N, S, 1] each. (Summed, a row with no
allowed key, max -1e9, would lose its log-sum in float32, whose spacing at 1e9 is 64.)

The arithmetic is the stock path's, reordered: scores in the inputs' dtype, then
masked (``-1e9``, not ``-inf``: a row with no allowed key attends uniformly to all
keys, as the stock path does) and exponentiated in float32 (float64 for float64
inputs), with the context accumulated in float32.

Limits:

* No dropout on the probabilities (they never exist whole): use this only when the
  attention dropout rate is 0 or the layer is not training.
* The gradient is first order: the backward is not itself differentiable through
  this function's custom gradient (a second derivative is wrong, not an error).
* No gradient for ``allowed``.
* Plain TensorFlow ops: eager, ``tf.function``, ``jit_compile=True`` (XLA fuses each
  block's ops) and ``tf.distribute`` replicas; batch, heads and length may be
  unknown at trace time. The blocks run in a ``tf.while_loop`` (one block when
  S ≤ ``block_size`` is known), the keys padded to whole blocks when S is not a
  multiple of ``block_size``: an unrolled Python loop let XLA:CPU compute every
  block's scores side by side, as much memory as the stock path.
* Memory, not speed, is the point on CPU: see the attention memory section of
  ``docs/results.md`` (``bench/attention_memory.py``).
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["blocked_attention"]

#: What a disallowed score becomes: the stock path's value (finite, so a row with
#: no allowed key is a uniform distribution rather than NaN).
MASKED_SCORE = -1e9


def blocked_attention(q, k, v, allowed=None, *, block_size: int = 128):
    """``softmax(where(allowed, q kᵀ, -1e9)) v`` over the last two axes, key block by
    key block.

    Args:
        q: queries [B, N, S, D] in the compute dtype (float16, bfloat16, float32 or
            float64), already multiplied by 1/√D.
        k, v: keys and values, [B, N, S, D], q's dtype.
        allowed: None, or a bool mask [B or 1, 1 or N, S or 1, S] (query, key):
            True where a query may attend to a key.
        block_size: keys per block; at least S gives one block (the stock
            arithmetic, materialised).

    Returns:
        The context [B, N, S, D] in q's dtype.

    Example:
        >>> import numpy as np
        >>> rng = np.random.RandomState(0)
        >>> q, k, v = (tf.constant(rng.randn(1, 2, 5, 4), tf.float32) for _ in range(3))
        >>> allowed = tf.constant([True, True, True, False, False])[None, None, None, :]
        >>> blocked = blocked_attention(q, k, v, allowed, block_size=2)
        >>> scores = tf.where(allowed, tf.matmul(q, k, transpose_b=True), -1e9)
        >>> stock = tf.matmul(tf.nn.softmax(scores), v)
        >>> bool(np.allclose(blocked, stock, atol=1e-6))
        True
    """
    if block_size < 1:
        raise ValueError(f"block_size must be positive, got {block_size}")
    q, k, v = (tf.convert_to_tensor(t) for t in (q, k, v))
    if q.shape.rank != 4:
        raise ValueError(f"q, k and v must be [B, N, S, D]; q is {q.shape}")
    if allowed is not None:
        allowed = tf.convert_to_tensor(allowed)
        if allowed.dtype != tf.bool:
            allowed = tf.cast(allowed, tf.bool)
        if allowed.shape.rank != 4:
            raise ValueError(f"allowed must be [B, 1, S, S]-broadcastable, got {allowed.shape}")
    seq = q.shape[2] if q.shape[2] is not None else k.shape[2]
    blocks = _Blocks(q.dtype, block_size, seq, allowed)

    if allowed is None:

        @tf.custom_gradient
        def attend(q, k, v):
            out, lse = blocks.forward(q, k, v, None)

            def grad(d_out):
                return blocks.backward(q, k, v, None, out, lse, d_out)

            return out, grad

        return attend(q, k, v)

    @tf.custom_gradient
    def attend_masked(q, k, v, allowed):
        out, lse = blocks.forward(q, k, v, allowed)

        def grad(d_out):
            return (*blocks.backward(q, k, v, allowed, out, lse, d_out), None)

        return out, grad

    return attend_masked(q, k, v, allowed)


class _Blocks:
    """The per-block arithmetic, and the loop over the blocks."""

    def __init__(self, dtype, block_size: int, seq: int | None, allowed) -> None:
        self.dtype = dtype
        #: Where maxima, sums, exponentials and the context accumulate.
        self.acc = tf.float64 if dtype == tf.float64 else tf.float32
        self.block_size = block_size
        self.seq = seq
        # A key axis of 1 broadcasts: every block reads the whole mask.
        self.slice_keys = allowed is not None and allowed.shape[-1] != 1

    # ------------------------------------------------------------------ one block
    def _scores(self, q, k_blk, allowed_blk, valid_blk):
        """[B, N, S, block] in ``acc``: masked, padding keys at -inf."""
        scores = tf.cast(tf.matmul(q, k_blk, transpose_b=True), self.acc)
        if allowed_blk is not None:
            scores = tf.where(allowed_blk, scores, tf.constant(MASKED_SCORE, self.acc))
        if valid_blk is not None:
            scores = tf.where(valid_blk, scores, tf.constant(-float("inf"), self.acc))
        return scores

    def _accumulate(self, state, q, k_blk, v_blk, allowed_blk, valid_blk=None):
        """One key block into (running max, running sum, unnormalised context)."""
        scores = self._scores(q, k_blk, allowed_blk, valid_blk)
        block_max = tf.reduce_max(scores, axis=-1, keepdims=True)
        if state is None:  # the first block: nothing to rescale
            m = block_max
            p = tf.exp(scores - m)
            total = tf.reduce_sum(p, axis=-1, keepdims=True)
            return m, total, self._context(p, v_blk)
        m_old, total_old, acc_old = state
        m = tf.maximum(m_old, block_max)
        p = tf.exp(scores - m)
        alpha = tf.exp(m_old - m)  # 0 at the start (-inf)
        total = alpha * total_old + tf.reduce_sum(p, axis=-1, keepdims=True)
        return m, total, alpha * acc_old + self._context(p, v_blk)

    def _context(self, p, v_blk):
        # p ≤ 1 is rounded to the compute dtype for the matmul, as the stock path
        # rounds its probabilities; the sum over blocks is in ``acc``.
        return tf.cast(tf.matmul(tf.cast(p, self.dtype), v_blk), self.acc)

    def _block_grads(self, q, k_blk, v_blk, allowed_blk, rows_t, d_out, valid_blk=None):
        """(dQ contribution, dK block, dV block) of one key block.

        Computed transposed, [B, N, block, S] (key, query): dV = Pᵀ dO and
        dK = dSᵀ Q need no transpose, and the recomputed k qᵀ is not an expression
        XLA's common-subexpression pass could merge with the forward's q kᵀ (which
        would keep the forward's scores alive until the backward).
        """
        m_t, log_total_t, d_row_t = rows_t  # [B, N, 1, S] each
        scores_t = tf.cast(tf.matmul(k_blk, q, transpose_b=True), self.acc)
        allowed_t = None
        if allowed_blk is not None:
            allowed_t = tf.linalg.matrix_transpose(allowed_blk)
            scores_t = tf.where(allowed_t, scores_t, tf.constant(MASKED_SCORE, self.acc))
        if valid_blk is not None:
            scores_t = tf.where(valid_blk[:, None], scores_t, -float("inf"))
        # The forward's probabilities, recomputed. (scores − m) first: for a row with
        # no allowed key m = -1e9, where m + log(total) would round the log away.
        p_t = tf.exp((scores_t - m_t) - log_total_t)
        d_v = tf.matmul(tf.cast(p_t, self.dtype), d_out)
        d_p_t = tf.cast(tf.matmul(v_blk, d_out, transpose_b=True), self.acc)
        d_s_t = p_t * (d_p_t - d_row_t)
        if allowed_t is not None:
            # `where` passes no gradient to a disallowed score; it matters for a
            # row with no allowed key, whose probabilities are all 1/S.
            d_s_t = tf.where(allowed_t, d_s_t, tf.zeros_like(d_s_t))
        d_s_t = tf.cast(d_s_t, self.dtype)
        d_q = tf.cast(tf.matmul(d_s_t, k_blk, transpose_a=True), self.acc)
        d_k = tf.matmul(d_s_t, q)
        return d_q, d_k, d_v

    # ------------------------------------------------------------------ the loops
    # Blocks go through a tf.while_loop, not an unrolled Python loop: XLA:CPU
    # scheduled the unrolled blocks' independent score matmuls side by side, which
    # kept all of them alive at once (temporaries as large as the stock path's);
    # a loop body's buffers live for one iteration. Keys (and the mask's key axis)
    # are padded to whole blocks when S is not a multiple of the block or is unknown
    # at trace time; -inf scores keep the padding out.
    def _one_block(self) -> bool:
        return self.seq is not None and self.seq <= self.block_size

    def _layout(self, k, v, allowed):
        """(S, blocks, k, v, allowed) with the keys padded to whole blocks, and
        whether any padding may be there."""
        size = self.block_size
        if self.seq is not None:
            seq, count = self.seq, -(-self.seq // size)
            pad = count * size - seq
            padded = pad > 0
        else:
            seq = tf.shape(k)[2]
            count = (seq + size - 1) // size
            pad = count * size - seq
            padded = True
        if padded:
            k = tf.pad(k, [[0, 0], [0, 0], [0, pad], [0, 0]])
            v = tf.pad(v, [[0, 0], [0, 0], [0, pad], [0, 0]])
            if allowed is not None and self.slice_keys:
                allowed = tf.pad(allowed, [[0, 0], [0, 0], [0, 0], [0, pad]], constant_values=False)
        return seq, count, k, v, allowed, padded

    def _block(self, i, layout):
        """Key block ``i``: (k, v, allowed, which keys are not padding or None)."""
        seq, _, k, v, allowed, padded = layout
        size = self.block_size
        start = i * size
        # tf.slice with every size given (from tf.shape: constants to XLA) is
        # XLA's dynamic-slice. A strided slice with dynamic bounds loses its static
        # size under XLA, and a size of -1 makes XLA pad the input to twice its
        # size in every dimension first.
        k_shape = tf.shape(k)
        k_blk_shape = tf.concat([k_shape[:2], [size], k_shape[3:]], axis=0)
        k_blk = tf.slice(k, tf.stack([0, 0, start, 0]), k_blk_shape)
        v_blk = tf.slice(v, tf.stack([0, 0, start, 0]), k_blk_shape)
        allowed_blk = allowed
        if allowed is not None and self.slice_keys:
            mask_shape = tf.concat([tf.shape(allowed)[:3], [size]], axis=0)
            allowed_blk = tf.slice(allowed, tf.stack([0, 0, 0, start]), mask_shape)
        valid = tf.range(size) + start < seq if padded else None
        return k_blk, v_blk, allowed_blk, valid

    def _loop(self, count, body, state):
        maximum = count if isinstance(count, int) else None
        return tf.while_loop(
            lambda i, *_: i < count, body, (tf.constant(0), *state), maximum_iterations=maximum
        )[1:]

    def forward(self, q, k, v, allowed):
        """(context in q's dtype, the log-sum-exp per row as its two terms
        (max, log of the sum), each [B, N, S, 1] in ``acc``)."""
        if self._one_block():
            m, total, acc = self._accumulate(None, q, k, v, allowed)
        else:
            layout = self._layout(k, v, allowed)
            rows = tf.concat([tf.shape(q)[:3], [1]], axis=0)
            start = (
                tf.fill(rows, tf.constant(-float("inf"), self.acc)),
                tf.zeros(rows, self.acc),
                tf.zeros(tf.shape(q), self.acc),
            )

            def body(i, m, total, acc):
                k_blk, v_blk, allowed_blk, valid = self._block(i, layout)
                state = self._accumulate((m, total, acc), q, k_blk, v_blk, allowed_blk, valid)
                return (i + 1, *state)

            m, total, acc = self._loop(layout[1], body, start)
        return tf.cast(acc / total, self.dtype), (m, tf.math.log(total))

    def backward(self, q, k, v, allowed, out, lse, d_out):
        """(dQ, dK, dV) in q's dtype."""
        d_out = tf.cast(d_out, self.dtype)
        d_row = tf.reduce_sum(
            tf.cast(d_out, self.acc) * tf.cast(out, self.acc), axis=-1, keepdims=True
        )
        # Per query row, as [B, N, 1, S] rows for the transposed blocks.
        rows_t = tuple(tf.linalg.matrix_transpose(t) for t in (*lse, d_row))
        if self._one_block():
            d_q, d_k, d_v = self._block_grads(q, k, v, allowed, rows_t, d_out)
            return tf.cast(d_q, self.dtype), d_k, d_v
        layout = self._layout(k, v, allowed)
        seq, count = layout[:2]

        def body(i, d_q, d_ks, d_vs):
            k_blk, v_blk, allowed_blk, valid = self._block(i, layout)
            dq_blk, d_k, d_v = self._block_grads(q, k_blk, v_blk, allowed_blk, rows_t, d_out, valid)
            return i + 1, d_q + dq_blk, d_ks.write(i, d_k), d_vs.write(i, d_v)

        start = (
            tf.zeros(tf.shape(q), self.acc),
            tf.TensorArray(self.dtype, size=count),
            tf.TensorArray(self.dtype, size=count),
        )
        d_q, d_ks, d_vs = self._loop(count, body, start)

        def whole(blocks):  # [blocks, B, N, block, D] → [B, N, S, D]
            stacked = tf.transpose(blocks.stack(), (1, 2, 0, 3, 4))
            shape = tf.shape(stacked)
            merged = tf.reshape(stacked, tf.concat([shape[:2], [-1], shape[4:]], axis=0))
            return merged[:, :, :seq]

        return tf.cast(d_q, self.dtype), whole(d_ks), whole(d_vs)
