"""`AlbertDense`: the feed-forward block's dense layer, servable in lower precision."""

from __future__ import annotations

import keras
from keras import ops

from albert_tf import kernels
from albert_tf.activations import gelu_new, gelu_new_recomputed
from albert_tf.layers.implementations import STOCK, Implementation


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertDense(keras.layers.Dense):
    """`keras.layers.Dense`, whose projection a serving model may replace.

    The weights, names and arithmetic are the parent's. A bfloat16 or int8
    serving model (`albert_tf.serving.precision.to_serving_precision`, on its
    own clone) runs the projection through a `Bfloat16Linear` or `Int8Linear`
    holding this layer's kernel and bias (`serve_projection_with`); the
    activation still runs in float32. Keras's own
    ``quantize("int8")`` is not used: its TensorFlow matmul is slower than
    float32 on CPU.

    Example:
        >>> import numpy as np
        >>> layer = AlbertDense(4, activation="gelu")
        >>> x = np.ones((2, 3), "float32")
        >>> bool(np.allclose(layer(x), keras.layers.Dense.call(layer, x)))
        True
    """

    #: How this layer computes; set for a whole model by `set_implementation`.
    implementation: Implementation = STOCK

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: A callable ``x → x @ kernel + bias`` in a serving model; None otherwise.
        self.serving_projection = None

    def serve_projection_with(self, projection) -> None:
        """From now on ``x @ kernel + bias`` is ``projection(x)``: for inference
        only (the kernel no longer trains through it). Call it before tracing."""
        self.serving_projection = projection

    def call(self, inputs, training=None):
        gelu = self.activation is gelu_new
        fused_gelu = gelu and self.implementation.fused_kernels
        recomputed_gelu = gelu and self.implementation.recompute_elementwise
        if self.serving_projection is None and not (fused_gelu or recomputed_gelu):
            return super().call(inputs, training=training)
        if self.serving_projection is not None:
            outputs = self.serving_projection(inputs)
        else:
            outputs = ops.matmul(inputs, self.kernel)
            if self.bias is not None:
                outputs = ops.add(outputs, self.bias)
        if fused_gelu and kernels.supports(outputs):
            return kernels.gelu_tanh(outputs)  # one kernel each way, not ~18 ops
        if recomputed_gelu:
            return gelu_new_recomputed(outputs)  # keeps its input only, for XLA
        return self.activation(outputs) if self.activation is not None else outputs
