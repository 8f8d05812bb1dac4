"""Two-way classifier on the pooled output: sentence order (or NSP)."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(keras.layers.Layer):
    """Dropout then Dense(2) on the pooled [CLS] vector.

    Label 0: segments in their original order; label 1: swapped (SOP) — or,
    with NSP data, B drawn from another document. The same layer serves both
    sentence tasks of the paper's Table 5; only the data differs.

    Args:
        dropout: rate before the classifier (``classifier_dropout_prob``).
        initializer_range: stddev of the kernel's truncated normal.

    Call arguments:
        pooled_output: float [batch, H].

    Returns:
        float32 logits [batch, 2].
    """

    def __init__(self, dropout: float, initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        x = self.dropout_layer(pooled_output, training=training)
        return ops.cast(self.dense(x), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(dropout=self.dropout, initializer_range=self.initializer_range)
        return config
