"""`SpanHead`: a start and an end score for every piece of the sequence."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class SpanHead(keras.layers.Layer):
    """Sequence output → Dense(2) → float32 logits [batch, seq, 2]: ``[..., 0]`` scores
    each piece as the answer's first, ``[..., 1]`` as its last.

    Hugging Face's ``AlbertForQuestionAnswering`` head (its ``qa_outputs``, no
    dropout) and the official ``run_squad_v1``'s: one dense layer applied to
    every piece's last hidden state. The sublayer name (``dense``) is part of
    the checkpoint name table.

    Args:
        initializer_range: stddev of the kernel's truncated normal.

    Example:
        >>> import numpy as np
        >>> head = SpanHead(initializer_range=0.02)
        >>> tuple(head(np.zeros((2, 5, 8), "float32")).shape)
        (2, 5, 2)
    """

    def __init__(self, initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, sequence_output_shape, *args):
        self.dense.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output):
        return ops.cast(self.dense(sequence_output), "float32")  # softmax in float32

    def get_config(self):
        return super().get_config() | {"initializer_range": self.initializer_range}
