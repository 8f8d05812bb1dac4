"""LayerNormalization that runs a fused kernel in training steps on CPU, and
an inference graph that oneDNN fuses once its weights are frozen."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from albert_tf import kernels
from albert_tf.layers.implementations import STOCK, Implementation

# The epsilon oneDNN's fused LayerNorm uses for the pattern `freeze` emits: TensorFlow's
# remapper (`FindMklLayerNorm`) does not read the pattern's epsilon constant there, it
# keeps its default of 1e-3. See `AlbertLayerNormalization.freeze`.
_FUSED_EPSILON = 1e-3


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertLayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization`, one kernel each way under ``fused_cpu``.

    Same weights (``gamma``, ``beta``), config and results as the parent; the
    normalisation over the last axis with scale and offset, which is every
    LayerNorm in ALBERT, runs as one kernel each way (`albert_tf.kernels`)
    under the ``fused_cpu`` implementation, which the trainers choose on CPU.
    After `freeze` (the serving export) it runs as one oneDNN op in the
    exported graph. Otherwise it runs the parent's code.

    Example:
        >>> import numpy as np
        >>> layer = AlbertLayerNormalization(epsilon=1e-12)
        >>> x = np.random.RandomState(0).randn(2, 3, 8).astype("float32")
        >>> y = keras.ops.convert_to_numpy(layer(x))
        >>> bool(np.allclose(y.mean(-1), 0, atol=1e-6) and np.allclose(y.std(-1), 1, atol=1e-4))
        True
        >>> layer.freeze()
        >>> bool(np.allclose(keras.ops.convert_to_numpy(layer(x)), y, atol=1e-5))
        True
    """

    #: ``(gamma, beta)`` as numpy arrays after `freeze`; None before.
    frozen = None

    #: How this layer computes; set for a whole model by `set_implementation`.
    implementation: Implementation = STOCK

    def freeze(self) -> None:
        """Traces from now on compute with today's ``gamma`` and ``beta`` as constants.

        With constants, TensorFlow's oneDNN remapper replaces the ten ops of
        ``(x - mean) · rsqrt(var + eps) · gamma + beta`` (written as its
        ``IsCommonNormPattern`` expects) by one ``_MklLayerNorm``: 2.7x faster
        on ALBERT-base's [1004, 768] activations, 25 of them per answer. That
        op ignores the pattern's epsilon and uses 1e-3, so the pattern
        normalises ``c·x`` with epsilon 1e-3, ``c = √(1e-3 / eps)``: the same
        function (LayerNorm(c·x; c²·eps) = LayerNorm(x; eps)), whichever
        epsilon the runtime uses. Only for inference: the weights stop
        training, and later weight changes are not seen by traces made after.
        """
        if not (self.center and self.scale) or self.rms_scaling:
            raise ValueError("freeze() needs a LayerNorm with both gamma and beta, no RMS scaling")
        gamma = ops.convert_to_numpy(self.gamma).astype(np.float32)
        beta = ops.convert_to_numpy(self.beta).astype(np.float32)
        self.frozen = (gamma, beta)

    def call(self, inputs):
        axis = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        rank = len(inputs.shape)
        last_axis_only = [a % rank for a in axis] == [rank - 1]
        if self.frozen is not None and last_axis_only and inputs.dtype == tf.float32:
            return ops.cast(self._frozen_call(inputs, rank - 1), self.compute_dtype)
        if (
            last_axis_only
            and self.center
            and self.scale
            and not self.rms_scaling
            and self.implementation.fused_kernels
            and kernels.supports(inputs)
        ):
            outputs = kernels.layer_norm(inputs, self.gamma, self.beta, self.epsilon)
            return ops.cast(outputs, self.compute_dtype)
        return super().call(inputs)

    def _frozen_call(self, x: tf.Tensor, axis: int) -> tf.Tensor:
        gamma, beta = self.frozen
        # The remapper wants a non-negative reduction axis, the mean kept, Const
        # gamma/beta, and this exact op structure (rank 2 or 3 inputs).
        x = x * math.sqrt(_FUSED_EPSILON / self.epsilon)
        mean = tf.reduce_mean(x, axis=[axis], keepdims=True)
        var = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=[axis], keepdims=True)
        scale = tf.math.rsqrt(var + _FUSED_EPSILON) * tf.constant(gamma)
        return tf.add(x * scale, tf.constant(beta) - scale * mean)
