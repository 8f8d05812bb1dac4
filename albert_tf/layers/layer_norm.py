"""LayerNormalization that runs a fused kernel in training steps on CPU."""

from __future__ import annotations

import keras
from keras import ops

from albert_tf import kernels


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertLayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization`, fused inside `albert_tf.kernels.fused()`.

    Same weights (``gamma``, ``beta``), config and results as the parent; the
    normalisation over the last axis with scale and offset, which is every
    LayerNorm in ALBERT, runs as one kernel each way (`albert_tf.kernels`)
    when a trainer asks for it. Any other setting, or outside a trainer's
    step, runs the parent's code.

    Example:
        >>> import numpy as np
        >>> layer = AlbertLayerNormalization(epsilon=1e-12)
        >>> x = np.random.RandomState(0).randn(2, 3, 8).astype("float32")
        >>> y = keras.ops.convert_to_numpy(layer(x))
        >>> bool(np.allclose(y.mean(-1), 0, atol=1e-6) and np.allclose(y.std(-1), 1, atol=1e-4))
        True
    """

    def call(self, inputs):
        axis = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        rank = len(inputs.shape)
        last_axis_only = [a % rank for a in axis] == [rank - 1]
        if (
            last_axis_only
            and self.center
            and self.scale
            and not self.rms_scaling
            and kernels.supports(inputs)
        ):
            outputs = kernels.layer_norm(inputs, self.gamma, self.beta, self.epsilon)
            return ops.cast(outputs, self.compute_dtype)
        return super().call(inputs)
