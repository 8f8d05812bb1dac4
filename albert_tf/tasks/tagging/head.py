"""`TokenClassifierHead`: a tag score for every piece of the sequence."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class TokenClassifierHead(keras.layers.Layer):
    """Sequence output → dropout → Dense(num_tags) → float32 logits [batch, seq, num_tags].

    Hugging Face's ``AlbertForTokenClassification`` head (its ``classifier``)
    and Model Garden's tagging head: one dense layer applied to every piece's
    last hidden state. Sublayer names (``dropout``, ``dense``) are part of the
    checkpoint name table.

    Args:
        num_tags: tags a piece can get (BIO: 1 + 2 per entity type).
        dropout: rate before the dense layer (``classifier_dropout_prob``).
        initializer_range: stddev of the kernel's truncated normal.

    Example:
        >>> import numpy as np
        >>> head = TokenClassifierHead(7, dropout=0.1, initializer_range=0.02)
        >>> tuple(head(np.zeros((2, 5, 8), "float32")).shape)
        (2, 5, 7)
    """

    def __init__(self, num_tags: int, dropout: float, initializer_range: float, **kwargs):
        super().__init__(**kwargs)
        self.num_tags = num_tags
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")
        self.dense = keras.layers.Dense(
            num_tags,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, sequence_output_shape, *args):
        self.dense.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output, training=None):
        x = self.dropout_layer(sequence_output, training=training)
        return ops.cast(self.dense(x), "float32")  # the loss and softmax in float32

    def get_config(self):
        config = super().get_config()
        config.update(
            num_tags=self.num_tags,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
        )
        return config
