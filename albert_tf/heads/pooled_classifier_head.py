"""Dropout then one dense layer on the pooled [CLS] vector: the classifier heads' core."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class PooledClassifierHead(keras.layers.Layer):
    """Pooled output → dropout → Dense(units) → float32 logits [batch, units].

    The sentence-order and multiple-choice heads are this layer with a fixed
    ``units``; a sequence-classification head is this layer with ``num_labels``.
    Sublayer names (``dropout``, ``dense``) are part of the checkpoint name table.

    Args:
        units: logits per input.
        dropout: rate before the classifier (``classifier_dropout_prob``).
        initializer_range: stddev of the kernel's truncated normal.

    Example:
        >>> import numpy as np
        >>> head = PooledClassifierHead(3, dropout=0.1, initializer_range=0.02)
        >>> tuple(head(np.zeros((4, 8), "float32")).shape)
        (4, 3)
    """

    def __init__(self, units: int, dropout: float, initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            units,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, pooled_output_shape, *args):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        x = self.dropout_layer(pooled_output, training=training)
        return ops.cast(self.dense(x), "float32")  # losses and softmax in float32

    def get_config(self):
        config = super().get_config()
        config.update(
            units=self.units, dropout=self.dropout, initializer_range=self.initializer_range
        )
        return config
