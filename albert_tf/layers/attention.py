"""Self-attention computed with plain 2-D and batched matmuls."""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from keras import ops

from albert_tf import kernels
from albert_tf.layers.blocked_attention import blocked_attention
from albert_tf.layers.implementations import STOCK, Implementation

#: The sequence length from which the ``xla`` implementation computes attention by
#: key blocks (`albert_tf.layers.blocked_attention`): at 512 the [B, heads, S, S]
#: probabilities are the largest thing a layer keeps for its backward pass.
BLOCKED_FROM = 512


def softmax_kept_as(scores, dtype):
    """softmax(``scores``) over the last axis, computed in float32 and returned in
    ``dtype``, whose gradient keeps only that ``dtype`` output.

    Autodiff through ``cast(softmax(float32 scores), bfloat16)`` would keep the
    float32 probabilities for softmax's gradient beside the bfloat16 ones the
    next matmul keeps: [B, heads, S, S] twice, 12.6 MB + 6.3 MB a layer and an
    example at length 512 with 12 heads. Here the backward reads the one
    bfloat16 (or float16) copy, upcast: the same formula, p·(dp − Σ dp·p), with
    p rounded once more (a relative 2⁻⁹ in bfloat16, the rounding the incoming
    gradient dp already carries).

    >>> import numpy as np
    >>> s = tf.constant(np.random.RandomState(0).randn(2, 5), tf.float32)
    >>> p = softmax_kept_as(s, tf.bfloat16)
    >>> p.dtype.name, bool(np.allclose(tf.cast(p, tf.float32), tf.nn.softmax(s), atol=4e-3))
    ('bfloat16', True)
    """
    dtype = tf.as_dtype(dtype)
    if dtype == tf.float32 or dtype == tf.float64:
        return tf.cast(tf.nn.softmax(scores, axis=-1), dtype)
    return _softmax_kept_as(scores, dtype)


def _softmax_kept_as(scores, dtype):
    @tf.custom_gradient
    def softmax(s):
        probs = tf.cast(tf.nn.softmax(s, axis=-1), dtype)

        def grad(dprobs):
            p = tf.cast(probs, s.dtype)
            dp = tf.cast(dprobs, s.dtype)
            return p * (dp - tf.reduce_sum(dp * p, axis=-1, keepdims=True))

        return probs, grad

    return softmax(scores)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertAttention(keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with a faster self-attention path.

    The weights are the parent's, unchanged (``query``, ``key``, ``value``
    kernels [H, heads, head_dim] with biases [heads, head_dim];
    ``attention_output`` kernel [heads, head_dim, H]), so checkpoints and the
    conversion table do not depend on which path runs. What changes is the
    arithmetic of self-attention (query is value, no key):

    * Q, K and V come from one [B·S, H] × [H, 3H] matmul instead of three
      einsums. On CPU, TensorFlow lowers the ``abc,cde->abde`` einsum to a
      broadcasting batch matmul whose kernel gradient is a per-example product
      followed by a sum over the batch; a 2-D matmul's gradient is one matmul.
    * Scores and the weighted sum are batch matmuls over [B, heads, S, ·]
      with no broadcasting; softmax runs in float32 (as autocast does), so
      bfloat16 scores cannot overflow the masked entries.
    * The output projection is one [B·S, H] × [H, H] matmul.
    * Where 1/√head_dim goes and how the mask applies is the layer's
      ``implementation`` (`albert_tf.layers.implementations`): folded into the
      weights with a ``where`` mask (training, XLA, the fused CPU kernels), or
      on the query with a 0 / -1e9 mask added, which oneDNN runs inside the
      score matmul (inference, serving).

    Anything else (cross-attention, a separate key, attention scores
    requested, causal masks, value_dim or output_shape set) goes through the
    parent's implementation.

    Example:
        >>> import numpy as np
        >>> layer = AlbertAttention(num_heads=2, key_dim=4)
        >>> x = np.random.RandomState(0).randn(1, 3, 8).astype("float32")
        >>> fast = layer(query=x, value=x)
        >>> slow = keras.layers.MultiHeadAttention.call(layer, query=x, value=x)
        >>> bool(np.allclose(fast, slow, atol=1e-6))
        True
    """

    #: How this layer computes; set for a whole model by `set_implementation`.
    implementation: Implementation = STOCK

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: In a bfloat16 or int8 serving model, ``{"qkv": ..., "output": ...}``:
        #: callables ``x → x @ kernel + bias`` running the two projections; else None.
        self.serving_projections = None

    def serve_projections_with(self, *, qkv, output) -> None:
        """From now on the fused query/key/value projection is ``qkv(x)`` (made
        from `qkv_weights` with ``fold_scale=False``) and the output projection
        ``output(context)``: for inference only
        (`albert_tf.serving.precision.to_serving_precision` calls it on its
        clone). Call it before tracing."""
        self.serving_projections = {"qkv": qkv, "output": output}

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        if (
            key is not None
            or query is not value
            or return_attention_scores
            or use_causal_mask
            or query_mask is not None
            or value_mask is not None
            or key_mask is not None
            or self._value_dim != self._key_dim
            or self._output_shape is not None
        ):
            return super().call(
                query,
                value,
                key=key,
                query_mask=query_mask,
                value_mask=value_mask,
                key_mask=key_mask,
                attention_mask=attention_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                use_causal_mask=use_causal_mask,
            )
        return self._self_attention(query, attention_mask, training)

    def qkv_weights(self, fold_scale: bool = True):
        """The fused query/key/value projection: kernel [H, 3H] and bias [3H],
        in the compute dtype, with 1/√head_dim folded into the query's part
        unless ``fold_scale`` is False (then `_self_attention` applies it)."""
        heads, head_dim = self.num_heads, self.key_dim
        width = heads * head_dim
        hidden = self._query_dense.kernel.shape[0]
        dtype = self.compute_dtype

        def kernel(dense, shape):
            return ops.reshape(ops.cast(dense.kernel, dtype), shape)

        def bias(dense, shape):
            return ops.reshape(ops.cast(dense.bias, dtype), shape)

        # 1/√head_dim is folded into the query's weights ([H, H], not
        # [B, heads, S, head_dim] activations); exact for head_dim 64.
        scale = ops.cast(1.0 / math.sqrt(head_dim) if fold_scale else 1.0, dtype)
        q_dense, k_dense, v_dense = self._query_dense, self._key_dense, self._value_dense
        w_qkv = ops.concatenate(
            [
                kernel(q_dense, (hidden, width)) * scale,
                kernel(k_dense, (hidden, width)),
                kernel(v_dense, (hidden, width)),
            ],
            axis=1,
        )
        b_qkv = ops.concatenate(
            [bias(q_dense, (width,)) * scale, bias(k_dense, (width,)), bias(v_dense, (width,))],
            axis=0,
        )
        return w_qkv, b_qkv

    def output_weights(self):
        """The output projection: kernel [H, H] and bias [H], in the compute dtype."""
        out_dense = self._output_dense
        width = self.num_heads * self.key_dim
        w_out = ops.reshape(
            ops.cast(out_dense.kernel, self.compute_dtype), (width, out_dense.kernel.shape[-1])
        )
        return w_out, ops.cast(out_dense.bias, self.compute_dtype)

    def _self_attention(self, x, attention_mask, training):
        heads, head_dim = self.num_heads, self.key_dim
        width = heads * head_dim
        batch, seq, hidden = ops.shape(x)[0], ops.shape(x)[1], x.shape[-1]
        dtype = self.compute_dtype
        serving = self.serving_projections is not None
        fused_kernels = (
            self.implementation.fused_kernels
            and not serving
            and attention_mask is not None
            and len(attention_mask.shape) == 3
            and kernels.supports(x)
        )
        # The training form folds 1/√head_dim into the query's weights: no
        # [B, heads, S, D] multiply to differentiate. The inference form applies
        # it to the query instead: oneDNN runs that multiply and the additive mask
        # inside the score matmul (_MklFusedBatchMatMulV2), faster than folding and
        # masking apart. Serving projections are made from the unscaled weights.
        fold_scale = fused_kernels or not (serving or self.implementation.scales_query(training))
        if serving:  # made from qkv_weights(fold_scale=False)
            qkv = self.serving_projections["qkv"](ops.reshape(x, (-1, hidden)))
        else:
            w_qkv, b_qkv = self.qkv_weights(fold_scale=fold_scale)
            qkv = ops.matmul(ops.reshape(x, (-1, hidden)), w_qkv) + b_qkv  # [B·S, 3·N·D]
        if fused_kernels:
            return self._fused_self_attention(qkv, attention_mask, (batch, seq), training)
        qkv = ops.reshape(qkv, (batch, seq, 3, heads, head_dim))
        qkv = ops.transpose(qkv, (2, 0, 3, 1, 4))  # [3, B, N, S, D]
        # Unstack, not indexing: the gradient of three slices is three
        # zero-padded copies of qkv and their sum; of an unstack, one stack.
        q, k, v = ops.unstack(qkv, num=3, axis=0)
        if not fold_scale:
            q = q * ops.cast(1.0 / math.sqrt(head_dim), q.dtype)

        if self._blocked(seq_length=x.shape[1], fold_scale=fold_scale, training=training):
            allowed = None
            if attention_mask is not None:
                allowed = tf.expand_dims(tf.cast(attention_mask, tf.bool), 1)
            context = blocked_attention(q, k, v, allowed)  # no [B, N, S, S] kept
            context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (-1, width))
            return self._output_projection(context, (batch, seq))

        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))  # [B, N, S, S]
        scores = ops.cast(scores, "float32")
        if attention_mask is not None:
            # [B, 1 or S, S] (query, key), True where attending is allowed.
            allowed = ops.expand_dims(ops.cast(attention_mask, "bool"), 1)
            if fold_scale:
                scores = ops.where(allowed, scores, -1e9)  # a scalar: no [B, N, S, S] fill
            else:
                # Added as 0 / -1e9, the form oneDNN fuses. (In training, `where`
                # also keeps rows with no allowed key out of the gradient.)
                scores = scores + (ops.cast(allowed, "float32") - 1.0) * 1e9
        if self.implementation.name == "serving":
            probs = ops.cast(ops.softmax(scores, axis=-1), dtype)
        else:
            probs = softmax_kept_as(scores, dtype)
        probs = self._dropout_layer(probs, training=training)
        context = ops.matmul(probs, v)  # [B, N, S, D]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (-1, width))

        return self._output_projection(context, (batch, seq))

    def _blocked(self, *, seq_length, fold_scale: bool, training) -> bool:
        """Whether this call takes `blocked_attention`: under the ``xla``
        implementation (blocks are a while loop XLA fuses), for sequences of at
        least `BLOCKED_FROM` (where the scores dominate what a step keeps), and
        with no dropout on the probabilities to apply (they never exist whole)."""
        return (
            self.implementation.blocked_attention
            and fold_scale
            and seq_length is not None
            and seq_length >= BLOCKED_FROM
            and not (training and self._dropout)
        )

    def _output_projection(self, context, batch_seq):
        if self.serving_projections is not None:
            out = self.serving_projections["output"](context)
        else:
            w_out, b_out = self.output_weights()
            out = ops.matmul(context, w_out) + b_out
        return ops.reshape(out, (*batch_seq, -1))  # [B, S, H]

    def _fused_self_attention(self, qkv, attention_mask, batch_seq, training):
        """The same arithmetic through `albert_tf.kernels` (inside a trainer's
        step on CPU): the head split/merge copies replace two transposes, and
        one kernel each way does the mask, the float32 softmax and its casts."""
        heads, width = self.num_heads, self.num_heads * self.key_dim
        qkv = tf.reshape(qkv, (*batch_seq, 3 * width))
        q, k, v = kernels.split_heads(qkv, 3, heads)  # 3 × [B, N, S, D]
        scores = tf.matmul(q, k, transpose_b=True)  # [B, N, S, S]
        probs = kernels.masked_softmax(scores, attention_mask)
        probs = self._dropout_layer(probs, training=training)
        context = kernels.merge_heads([tf.matmul(probs, v)])  # [B, S, N·D]
        return self._output_projection(tf.reshape(context, (-1, width)), batch_seq)
